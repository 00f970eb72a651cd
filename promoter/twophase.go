package promoter

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// Candidate results a runtime reports, read back by the control plane.
const (
	CandidateReady    = "READY"
	CandidateRejected = "REJECTED"
)

// CandidateReceipt is the latest candidate-phase receipt of one identity
// about its candidate snapshot of a staged release.
type CandidateReceipt struct {
	Host, ServiceID string
	SnapshotID      string
	Result          string // READY or REJECTED
	Reason          string
}

// ReadinessSource reports what runtimes said about the candidate snapshots
// of a staged release: the latest candidate-phase receipt per identity, for
// exactly the release's snapshot of that identity. *Store satisfies it from
// the receipts read back into runtime_evidence.
type ReadinessSource interface {
	CandidateReceipts(ctx context.Context, envTag string, release int64) ([]CandidateReceipt, error)
}

var _ ReadinessSource = (*Store)(nil)

// CandidateReceipts returns, per identity of the release, its latest
// candidate-phase receipt (kind 'receipt', phase 'candidate') about exactly
// the release's snapshot of that identity, read back since the release was
// staged: an answer about the same snapshot staged by an earlier release
// (a rejection that failed it, before the runtime was fixed) is not about
// this staging. Observations a runtime reports about itself are not
// receipts and never count.
func (s *Store) CandidateReceipts(ctx context.Context, envTag string, release int64) ([]CandidateReceipt, error) {
	rows, err := s.pool.Query(ctx, candidateReceiptsSQL, envTag, release)
	if err != nil {
		return nil, dbErr("read candidate receipts", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CandidateReceipt, error) {
		var c CandidateReceipt
		err := r.Scan(&c.Host, &c.ServiceID, &c.SnapshotID, &c.Result, &c.Reason)
		return c, err
	})
	if err != nil {
		return nil, dbErr("read candidate receipts", err)
	}
	return out, nil
}

// candidateReceiptsSQL is CandidateReceipts' statement. Each target of the
// release looks up its own latest candidate receipt (a LATERAL subquery
// ordered by evidence_id, LIMIT 1), so the plan is one index probe per
// target whatever the statistics say. A join of the release's targets with
// every receipt of the environment, planned just after the release was
// staged and its receipts arrived (statistics not yet analyzed: one row
// estimated on each side), was a nested loop comparing every target with
// every receipt: 42 s at 10,000 targets.
const candidateReceiptsSQL = `SELECT rt.host, rt.service_id, e.snapshot_id::text, e.outcome, e.reason
	FROM configpub.config_release_target rt
	CROSS JOIN LATERAL (SELECT e.snapshot_id, e.outcome, e.reason
		FROM configpub.runtime_evidence e
		WHERE e.env_tag = rt.env_tag AND e.host = rt.host AND e.service_id = rt.service_id
		  AND e.snapshot_id = rt.snapshot_id AND e.kind = 'receipt' AND e.phase = 'candidate'
		  AND e.reported_at >= coalesce((SELECT j.recorded_at FROM configpub.config_release_journal j
			WHERE j.env_tag = $1 AND j.release_version = $2 AND j.event_kind = '` + ActionStage + `'
			ORDER BY j.sequence LIMIT 1), '-infinity')
		ORDER BY e.evidence_id DESC LIMIT 1) e
	WHERE rt.env_tag = $1 AND rt.release_version = $2
	ORDER BY rt.host, rt.service_id`

// ActivateOptions configures ActivateRelease.
type ActivateOptions struct {
	// BreakGlass overrides a freeze window; the reason is journaled as
	// "break-glass in freeze window NAME: REASON".
	BreakGlass bool
	// Timeout bounds the wait of a two-phase activation for READY
	// candidates. Default 5 minutes.
	Timeout time.Duration
	// Poll is the interval between readiness checks. Default 1 s.
	Poll time.Duration
	// Readiness supplies the candidate receipts. Default: the Store.
	Readiness ReadinessSource
	// Progress, if set, is called after every readiness check.
	Progress func(ReadinessProgress)
}

// ReadinessProgress is one readiness check of a two-phase activation.
type ReadinessProgress struct {
	Ready, Required int
	Waiting         []string // identities without a READY receipt yet, sorted
	Elapsed         time.Duration
}

// ActivateRelease is `configpub activate`: it refuses inside a freeze
// window of the release's rollout policy or of the active release's
// (RolloutInForce) (*FreezeError) unless opts.BreakGlass, and, when either
// policy requires two-phase activation and the release is STAGED, waits
// until every target the activation would move has a READY receipt for
// exactly its candidate snapshot before moving every pointer in one
// activation (Activate). A RECORDED release (one promote caught up) in a
// two-phase environment is staged first (its candidate pointers and
// manifests written, RECORDED → STAGED), then waited for the same way;
// a timeout leaves it STAGED. A REJECTED candidate
// marks the release FAILED and returns a *RejectedError; a timeout returns
// a *NotReadyError naming the identities still missing. Nothing moves in
// either case. The freeze windows are checked when it starts (a window
// open then refuses before the wait) and again by Activate under the
// environment's lock, which is the check that decides: a window that
// opened during the wait refuses the activation there.
func (s *Store) ActivateRelease(ctx context.Context, in MoveInput, opts ActivateOptions) (*ActivationResult, error) {
	if err := in.validate(); err != nil {
		return nil, fmt.Errorf("activate %s release %d: %w", in.EnvTag, in.Release, err)
	}
	in.BreakGlass = in.BreakGlass || opts.BreakGlass
	ri, err := readRelease(ctx, s.pool, in.EnvTag, in.Release)
	if err != nil {
		// Activate names what the environment has.
		return s.Activate(ctx, in)
	}
	inForce, active, err := rolloutInForce(ctx, s.pool, in.EnvTag)
	if err != nil {
		return nil, fmt.Errorf("activate %s release %d: %w", in.EnvTag, in.Release, err)
	}
	if active == in.Release {
		inForce = nil // Activate says it is active already
	}
	if _, err := CheckFreezeInForce(in.EnvTag, &ri.Rollout, inForce, active, s.now(), in.BreakGlass, in.Reason); err != nil {
		return nil, fmt.Errorf("activate %s release %d: %w", in.EnvTag, in.Release, err)
	}
	if ri.Outcome == OutcomeIntegrityError {
		return nil, fmt.Errorf("activate %s release %d: %w", in.EnvTag, in.Release, integrityRefusal(in.EnvTag, in.Release))
	}
	twoPhase := ri.Rollout.TwoPhase() || inForce.TwoPhase()
	if twoPhase && (ri.State == StateStaged || ri.State == StateRecorded) {
		// A release whose activation windows have ended (staged and left)
		// can never be activated: say so now, not after the wait.
		if w, err := outsideWindow(ctx, s.pool, in.EnvTag, in.Release, s.now()); err != nil {
			return nil, fmt.Errorf("activate %s release %d: %w", in.EnvTag, in.Release, err)
		} else if w != nil && !w.At.Before(w.ValidFrom) {
			return nil, fmt.Errorf("activate %s release %d (command %s): %w", in.EnvTag, in.Release, in.CommandID, w)
		}
	}
	if twoPhase && ri.State == StateRecorded {
		// A release promote caught up (recorded, never staged) has no
		// candidate any runtime could have prefetched: stage it now, then
		// wait for every candidate READY as for a STAGED release, so that
		// no pointer moves before every runtime verified its snapshot.
		if err := s.stageRecorded(ctx, in); err != nil {
			return nil, fmt.Errorf("activate %s release %d (command %s): %w", in.EnvTag, in.Release, in.CommandID, err)
		}
		if ri, err = readRelease(ctx, s.pool, in.EnvTag, in.Release); err != nil {
			return nil, fmt.Errorf("activate %s release %d: %w", in.EnvTag, in.Release, err)
		}
	}
	if twoPhase && ri.State == StateStaged {
		res, err := s.activateWhenReady(ctx, in, opts)
		var wait waitError
		if errors.As(err, &wait) {
			return nil, fmt.Errorf("activate %s release %d (command %s): %w", in.EnvTag, in.Release, in.CommandID, wait.err)
		}
		var fe *FreezeError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("activate %s release %d (command %s): every candidate became READY, but %w; release %d stays STAGED (activate it once the window has closed)",
				in.EnvTag, in.Release, in.CommandID, fe, in.Release)
		}
		return res, err
	}
	return s.Activate(ctx, in)
}

// activateWhenReady waits until every target the activation of the staged
// release would move is READY (awaitReady), then activates it on the
// condition that the release active during the last readiness check is
// still active when the activation takes the environment's lock: the
// targets it moves, and so the candidates it needs READY, are the ones that
// differ from that release. A move meanwhile (an operator's rollback) makes
// it wait again, within opts.Timeout, for the targets it moves now.
func (s *Store) activateWhenReady(ctx context.Context, in MoveInput, opts ActivateOptions) (*ActivationResult, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	deadline := time.Now().Add(opts.Timeout)
	for {
		before, err := s.activeRelease(ctx, in.EnvTag)
		if err != nil {
			return nil, waitError{err}
		}
		if err := s.awaitReady(ctx, in, opts); err != nil {
			return nil, waitError{err}
		}
		after, err := s.activeRelease(ctx, in.EnvTag)
		if err != nil {
			return nil, waitError{err}
		}
		if after == before {
			// The wait can last --timeout: a freeze window may have
			// opened meanwhile (or another release become active,
			// bringing its policy). Activate checks the windows under the
			// environment's lock as the pointers move.
			in.from = after
			res, err := s.Activate(ctx, in)
			if !errors.Is(err, errActiveChanged) || time.Now().After(deadline) {
				return res, err
			}
		}
		if opts.Timeout = time.Until(deadline); opts.Timeout <= 0 {
			opts.Timeout = time.Nanosecond // one last check, then the timeout names what is missing
		}
	}
}

// waitError is an error of activateWhenReady's wait, which ActivateRelease
// names the command of (the activation's own errors name it already).
type waitError struct{ err error }

func (e waitError) Error() string { return e.err.Error() }
func (e waitError) Unwrap() error { return e.err }

// activeRelease reads an environment's active release (0: none).
func (s *Store) activeRelease(ctx context.Context, envTag string) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(current_release_version, 0) FROM configpub.environment WHERE env_tag = $1`, envTag).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, dbErr("read the active release of "+envTag, err)
	}
	return v, nil
}

// integrityRefusal is the refusal of any pointer move to a release whose
// execution outcome is INTEGRITY_ERROR: a human decides first.
func integrityRefusal(envTag string, release int64) error {
	return fmt.Errorf("release %d of %s: its outcome is INTEGRITY_ERROR (receipts contradict the journal; see its history); nothing moved: %w",
		release, envTag, ErrIntegrity)
}

// awaitReady polls the candidate receipts of in.Release until every moving
// target is READY for its snapshot, one is REJECTED (the release is marked
// FAILED), or opts.Timeout passes. Before every check it renews the
// candidate manifests whose lease is due (RenewCandidates), so no candidate
// lease expires during the wait.
func (s *Store) awaitReady(ctx context.Context, in MoveInput, opts ActivateOptions) error {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	src := opts.Readiness
	if src == nil {
		src = s
	}
	start := time.Now()
	deadline := start.Add(opts.Timeout)
	for {
		// Keep every candidate lease live while waiting: a runtime that
		// prefetches late still gets a manifest it can verify.
		if _, err := s.RenewCandidates(ctx, in.EnvTag, in.Release); err != nil {
			return err
		}
		required, err := movingSnapshots(ctx, s.pool, in.EnvTag, in.Release)
		if err != nil {
			return err
		}
		if c, err := contradictedCandidate(ctx, s.pool, in.EnvTag, in.Release); err != nil {
			return err
		} else if c != nil {
			return s.markIntegrityError(ctx, in, c)
		}
		receipts, err := src.CandidateReceipts(ctx, in.EnvTag, in.Release)
		if err != nil {
			return err
		}
		got := make(map[string]CandidateReceipt, len(receipts))
		for _, r := range receipts {
			got[r.Host+"/"+r.ServiceID] = r
		}
		var waiting []string
		for id, snap := range required {
			r, ok := got[id]
			switch {
			case !ok || r.SnapshotID != snap:
				waiting = append(waiting, id)
			case r.Result == CandidateRejected:
				return s.failRelease(ctx, in, r)
			case r.Result != CandidateReady:
				waiting = append(waiting, id)
			}
		}
		sort.Strings(waiting)
		if opts.Progress != nil {
			opts.Progress(ReadinessProgress{Ready: len(required) - len(waiting), Required: len(required),
				Waiting: waiting, Elapsed: time.Since(start)})
		}
		if len(waiting) == 0 {
			return nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			nr := &NotReadyError{EnvTag: in.EnvTag, Release: in.Release, Timeout: opts.Timeout,
				Ready: len(required) - len(waiting), Missing: waiting}
			if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(release_version), 0) FROM configpub.candidate_pointer
				WHERE env_tag = $1 AND release_version > $2`, in.EnvTag, in.Release).Scan(&nr.NewerStaged); err != nil {
				return dbErr("read releases staged after "+strconv.FormatInt(in.Release, 10), err)
			}
			return nr
		}
		t := time.NewTimer(min(wait, opts.Poll))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// movingSnapshots maps every target of the release whose pointer an
// activation would move ("host/serviceId") to its snapshot.
func movingSnapshots(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, envTag string, version int64) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT rt.host || '/' || rt.service_id, rt.snapshot_id::text
		FROM configpub.config_release_target rt
		`+targetPointer+`
		WHERE rt.env_tag = $1 AND rt.release_version = $2 AND `+movingTargets, envTag, version)
	if err != nil {
		return nil, dbErr("read moving targets", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, snap string
		if err := rows.Scan(&id, &snap); err != nil {
			return nil, dbErr("read moving targets", err)
		}
		out[id] = snap
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read moving targets", err)
	}
	return out, nil
}

// failRelease marks a STAGED release FAILED after a rejected candidate, in
// one transaction under the environment's lock: the activate command is
// settled NOT_APPLIED, the journal names the identity, snapshot and reason,
// its candidate pointers are removed (not those of an older release still
// staged), and nothing moves. It returns the
// *RejectedError.
func (s *Store) failRelease(ctx context.Context, in MoveInput, r CandidateReceipt) error {
	rej := &RejectedError{EnvTag: in.EnvTag, Release: in.Release, Identity: r.Host + "/" + r.ServiceID,
		SnapshotID: r.SnapshotID, Reason: r.Reason}
	cmd := moveCommand(ActionActivate, in)
	var failed bool
	var events []Event
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		failed, events = false, nil
		now := s.now()
		e, err := lockExistingEnv(ctx, tx, in.EnvTag)
		if err != nil {
			return err
		}
		rel, err := lockRelease(ctx, tx, in.EnvTag, in.Release)
		if err != nil {
			return err
		}
		if rel.State != StateStaged || e.Pending == in.Release {
			return nil // activated, failed or in flight meanwhile: leave it
		}
		prior, err := claimCommand(ctx, tx, cmd, in.Actor, now)
		if err != nil {
			return err
		}
		if prior != nil && prior.Outcome == OutcomeApplied {
			return fmt.Errorf("command %s was already applied: %w", cmd.ID, ErrConflict)
		}
		if events, err = s.failRejected(ctx, tx, rel, cmd, in.Actor, in.Reason, rej, now, nil,
			"candidate rejected; no pointer moved"); err != nil {
			return err
		}
		failed = true
		return nil
	})
	if err != nil {
		return err
	}
	if failed {
		for _, ev := range events {
			s.emit(ctx, ev)
		}
	}
	return rej
}

// contradiction is a receipt that contradicts the journal.
type contradiction struct {
	Identity, SnapshotID string
	EvidenceID           int64
}

// contradictedCandidateSQL is contradictedCandidate's statement: per
// target of the release, its earliest APPLIED current-phase receipt about
// the target's snapshot (a LATERAL subquery, one index probe per target
// whatever the statistics say, as in candidateReceiptsSQL), kept when no
// pointer move ever gave the identity that snapshot; the earliest of
// those.
const contradictedCandidateSQL = `SELECT rt.host || '/' || rt.service_id, rt.snapshot_id::text, e.evidence_id
	FROM configpub.config_release_target rt
	CROSS JOIN LATERAL (SELECT e.evidence_id
		FROM configpub.runtime_evidence e
		WHERE e.env_tag = rt.env_tag AND e.host = rt.host AND e.service_id = rt.service_id
		  AND e.snapshot_id = rt.snapshot_id AND e.kind = 'receipt' AND e.phase = 'current' AND e.outcome = 'APPLIED'
		ORDER BY e.evidence_id LIMIT 1) e
	WHERE rt.env_tag = $1 AND rt.release_version = $2
	  AND NOT EXISTS (SELECT 1 FROM configpub.pointer_move m WHERE m.env_tag = rt.env_tag AND m.host = rt.host
		AND m.service_id = rt.service_id AND m.next_snapshot_id = rt.snapshot_id)
	ORDER BY e.evidence_id LIMIT 1`

// contradictedCandidate returns a receipt saying a runtime runs (current
// phase, APPLIED) a candidate snapshot of the staged release that no
// pointer move ever gave that identity, or nil.
func contradictedCandidate(ctx context.Context, q querier, envTag string, version int64) (*contradiction, error) {
	var c contradiction
	err := q.QueryRow(ctx, contradictedCandidateSQL, envTag, version).Scan(&c.Identity, &c.SnapshotID, &c.EvidenceID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("check receipts against the journal", err)
	}
	return &c, nil
}

// markIntegrityError settles a staged release whose receipts contradict
// the journal: execution outcome INTEGRITY_ERROR, the evidence journaled,
// nothing moved; it is not activated until a human decides. Its
// release.failed event is recorded in the same transaction and sent only
// by the call that marked it.
func (s *Store) markIntegrityError(ctx context.Context, in MoveInput, c *contradiction) error {
	cmd := moveCommand(ActionActivate, in)
	var marked *Event
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		marked = nil
		now := s.now()
		e, err := lockExistingEnv(ctx, tx, in.EnvTag)
		if err != nil {
			return err
		}
		rel, err := lockRelease(ctx, tx, in.EnvTag, in.Release)
		if err != nil {
			return err
		}
		if rel.State != StateStaged || rel.Outcome == OutcomeIntegrityError || e.Pending == in.Release {
			return nil
		}
		if err := mutate(ctx, tx, rel, event{Kind: "integrity-error", ToState: rel.State, ToOutcome: OutcomeIntegrityError,
			CommandID: cmd.ID, Hash: cmd.Hash, Actor: in.Actor, Reason: in.Reason, RecordedAt: now,
			Evidence: map[string]any{"identity": c.Identity, "snapshotId": c.SnapshotID, "evidenceId": c.EvidenceID,
				"finding": "a receipt says the runtime runs a candidate snapshot no pointer move ever gave it"}}); err != nil {
			return err
		}
		ev := Event{Kind: EventFailed, EnvTag: in.EnvTag, Release: in.Release, State: StateStaged,
			Outcome: OutcomeIntegrityError, Actor: in.Actor, At: now,
			Detail: fmt.Sprintf("receipt %d: %s reports running candidate %s that was never activated; nothing moved", c.EvidenceID, c.Identity, c.SnapshotID)}
		if err := s.recordEvent(ctx, tx, &ev); err != nil {
			return err
		}
		marked = &ev
		return nil
	})
	if err != nil {
		return err
	}
	if marked != nil {
		s.emit(ctx, *marked)
	}
	return fmt.Errorf("release %s/%d: receipt %d says %s runs candidate snapshot %s, which no pointer move ever gave it; outcome INTEGRITY_ERROR, nothing moved, a human decides: %w",
		in.EnvTag, in.Release, c.EvidenceID, c.Identity, c.SnapshotID, ErrIntegrity)
}
