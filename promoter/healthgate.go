package promoter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/textlist"
)

// HealthGateActor is the actor of the health gate's rollbacks.
const HealthGateActor = "health-gate"

// Health gate verdicts.
const (
	GateNone       = "NONE"        // no gate, or nothing to watch (no active release, not an activation)
	GateWatching   = "WATCHING"    // inside the soak window, below every threshold
	GatePassed     = "PASSED"      // the soak ended below every threshold (recorded once)
	GateRolledBack = "ROLLED_BACK" // a threshold was crossed: rolled back now
	GateDone       = "DONE"        // already passed for this activation
)

// GateVerdict is one health-gate evaluation of an environment.
type GateVerdict struct {
	EnvTag      string    `json:"envTag"`
	Release     int64     `json:"release"`
	Previous    int64     `json:"previous"`
	Verdict     string    `json:"verdict"`
	ActivatedAt time.Time `json:"activatedAt,omitzero"`
	SoakEnds    time.Time `json:"soakEnds,omitzero"`
	Moved       int       `json:"moved"`
	// Rejected lists, in identity order, the first GateListed moved
	// targets whose latest receipt rejected the release, as
	// "host/serviceId (REASON)"; RejectedCount counts them all.
	Rejected      []string `json:"rejected,omitempty"`
	RejectedCount int      `json:"rejectedCount"`
	// Missing lists, in identity order, the first GateListed moved
	// targets without an APPLIED receipt ("host/serviceId");
	// MissingCount counts them all.
	Missing      []string          `json:"missing,omitempty"`
	MissingCount int               `json:"missingCount"`
	Reason       string            `json:"reason,omitempty"` // the rollback's journaled reason
	Rollback     *ActivationResult `json:"rollback,omitempty"`
}

// GateListed is how many identities a GateVerdict lists of each kind (the
// counts cover them all), so a verdict over 100,000 silent targets stays
// small.
const GateListed = 100

// activationFacts is what the gate reads about the active release.
type activationFacts struct {
	release, previous int64
	activatedAt       time.Time
	cmdID             string
	rollout           bundle.Rollout
	passed            bool
}

// CheckHealth evaluates the health gate of envTag once, at the store's
// clock. The gate watches the active release's soak window (its rollout
// policy's healthGate) after an activation by promote or activate (not a
// rollback). Within the soak, when at least healthGate.rejections distinct
// moved targets' latest receipt about their new snapshot is REJECTED, or,
// at the end of the soak, when at least healthGate.missingAcks moved
// targets have no APPLIED receipt for it, it rolls the whole environment
// back to the previous release in one transaction (Rollback) as actor
// health-gate, with the evidence in the reason. A soak that ends below
// every threshold is journaled once (health-gate-passed) and never
// re-evaluated. Receipts are read back by the control plane; observations
// a runtime reports about itself never count.
//
// An environment that does not exist is ErrNotFound (a typo in a CI job's
// gate --once must not read as "nothing to watch"); one that exists with
// no activation to watch is GateNone.
func (s *Store) CheckHealth(ctx context.Context, envTag string) (*GateVerdict, error) {
	v, err := s.checkHealth(ctx, envTag)
	if err == nil && v.Release == 0 {
		err = s.envExists(ctx, envTag)
	}
	if err != nil {
		return nil, fmt.Errorf("health gate %s: %w", envTag, err)
	}
	return v, nil
}

// envExists returns ErrNotFound when envTag has no environment row.
func (s *Store) envExists(ctx context.Context, envTag string) error {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.environment WHERE env_tag = $1)`, envTag).Scan(&ok); err != nil {
		return dbErr("read environment "+envTag, err)
	}
	if !ok {
		return fmt.Errorf("environment %s: %w", envTag, ErrNotFound)
	}
	return nil
}

func (s *Store) checkHealth(ctx context.Context, envTag string) (*GateVerdict, error) {
	v := &GateVerdict{EnvTag: envTag, Verdict: GateNone}
	a, err := s.activationFacts(ctx, envTag)
	if err != nil || a == nil {
		return v, err
	}
	g := a.rollout.HealthGate
	v.Release, v.Previous, v.ActivatedAt = a.release, a.previous, a.activatedAt
	if g == nil || a.previous == 0 {
		return v, nil
	}
	if a.passed {
		v.Verdict = GateDone
		return v, nil
	}
	now := s.now()
	v.SoakEnds = a.activatedAt.Add(g.SoakDuration())
	if err := s.readEvidence(ctx, envTag, a, v); err != nil {
		return nil, err
	}
	soakOver := !now.Before(v.SoakEnds)
	var why string
	switch {
	case g.Rejections > 0 && v.RejectedCount >= g.Rejections:
		why = fmt.Sprintf("%d of %d moved targets rejected release %d within its %s soak (threshold %d): %s",
			v.RejectedCount, v.Moved, a.release, g.Soak, g.Rejections, textlist.Join(v.Rejected, v.RejectedCount, gateReasonNames))
	case soakOver && g.MissingAcks > 0 && v.MissingCount >= g.MissingAcks:
		why = fmt.Sprintf("%d of %d moved targets did not acknowledge release %d by the end of its %s soak (threshold %d): %s",
			v.MissingCount, v.Moved, a.release, g.Soak, g.MissingAcks, textlist.Join(v.Missing, v.MissingCount, gateReasonNames))
	case soakOver:
		v.Verdict = GatePassed
		return v, s.markPassed(ctx, envTag, a, v)
	default:
		v.Verdict = GateWatching
		return v, nil
	}
	v.Reason = "health gate: " + why
	cmdID := uuid.NewSHA1(uuid.NameSpaceOID, []byte("configpub/health-gate/"+envTag+"/"+a.cmdID)).String()
	res, err := s.Rollback(ctx, RollbackInput{CommandID: cmdID, EnvTag: envTag, ToRelease: a.previous,
		Actor: HealthGateActor, Reason: v.Reason, From: a.release})
	if errors.Is(err, ErrConflict) {
		// Another gate judging the same activation (another process, or
		// an operator's gate --once) claimed the command first, with a
		// reason from evidence read a moment apart: run that gate's
		// command, which replays its result or, in flight, waits for it
		// (and completes it if that gate stopped).
		reason, ok, oerr := s.otherGateReason(ctx, cmdID, envTag, a.previous)
		if oerr != nil {
			return nil, fmt.Errorf("%w (reading command %s: %w)", err, cmdID, oerr)
		}
		if ok {
			v.Reason = reason
			res, err = s.Rollback(ctx, RollbackInput{CommandID: cmdID, EnvTag: envTag, ToRelease: a.previous,
				Actor: HealthGateActor, Reason: reason, From: a.release})
		}
	}
	if err != nil {
		return nil, err
	}
	v.Verdict, v.Rollback = GateRolledBack, res
	return v, nil
}

// otherGateReason returns the reason with which another health gate
// recorded cmdID, its rollback of envTag to release to (ok false when
// cmdID is not such a command).
func (s *Store) otherGateReason(ctx context.Context, cmdID, envTag string, to int64) (reason string, ok bool, err error) {
	c, err := loadCommand(ctx, s.pool, cmdID)
	if isNotFound(err) {
		return "", false, nil
	}
	if err != nil || c.Action != ActionRollback || c.EnvTag != envTag || c.Release != to {
		return "", false, err
	}
	err = s.pool.QueryRow(ctx, `SELECT reason FROM configpub.config_release_journal
		WHERE env_tag = $1 AND release_version = $2 AND command_id = $3::text::uuid AND event_kind = $4
		ORDER BY sequence DESC LIMIT 1`, envTag, to, cmdID, ActionRollback+"-intent").Scan(&reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, dbErr("read the other gate's reason", err)
	}
	return reason, true, nil
}

// gateReasonNames is how many rejected or missing targets a verdict's
// reason names (the verdict itself lists GateListed).
const gateReasonNames = 10

// activationFacts reads the active release, the command and time of the
// promote or activate that made it active, the release it replaced and
// whether its gate already passed. nil when the environment has no active
// release or it became active by a rollback.
func (s *Store) activationFacts(ctx context.Context, envTag string) (*activationFacts, error) {
	var a activationFacts
	var kind string
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT e.current_release_version, j.event_kind, j.command_id::text, j.recorded_at, r.rollout,
			coalesce((SELECT m.previous_release_version FROM configpub.pointer_move m
				WHERE m.command_id = j.command_id AND m.env_tag = e.env_tag ORDER BY m.move_id LIMIT 1), 0),
			EXISTS (SELECT 1 FROM configpub.config_release_journal p WHERE p.env_tag = e.env_tag
				AND p.release_version = e.current_release_version AND p.event_kind = 'health-gate-passed'
				AND p.sequence > j.sequence)
		FROM configpub.environment e
		JOIN configpub.config_release r ON r.env_tag = e.env_tag AND r.release_version = e.current_release_version
		JOIN LATERAL (SELECT * FROM configpub.config_release_journal j WHERE j.env_tag = e.env_tag
			AND j.release_version = e.current_release_version AND j.to_state = 'ACTIVE'
			AND j.from_state IS DISTINCT FROM 'ACTIVE' ORDER BY j.sequence DESC LIMIT 1) j ON true
		WHERE e.env_tag = $1`, envTag).Scan(&a.release, &kind, &a.cmdID, &a.activatedAt, &raw, &a.previous, &a.passed)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("read the active release", err)
	}
	if kind != ActionPromote && kind != ActionActivate {
		return nil, nil
	}
	if err := json.Unmarshal(raw, &a.rollout); err != nil {
		return nil, fmt.Errorf("release %s/%d: recorded rollout policy: %v: %w", envTag, a.release, err, ErrIntegrity)
	}
	a.activatedAt = a.activatedAt.UTC()
	return &a, nil
}

// readEvidence reads the targets the activation a moved (not retired), in
// identity order (bytewise), each with its latest receipt about its new
// snapshot read back since the move (as status counts acknowledgements and
// rejections: a receipt from an earlier activation of the same snapshot,
// before a rollback, is not about this one), and counts into v those moved, rejected and missing, listing
// the first GateListed of the last two: memory holds those lists, not the
// moved targets.
func (s *Store) readEvidence(ctx context.Context, envTag string, a *activationFacts, v *GateVerdict) error {
	rows, err := s.pool.Query(ctx, `SELECT m.host || '/' || m.service_id, coalesce(e.outcome, ''), coalesce(e.reason, '')
		FROM configpub.pointer_move m
		LEFT JOIN LATERAL (SELECT outcome, reason FROM configpub.runtime_evidence e
			WHERE e.env_tag = m.env_tag AND e.host = m.host AND e.service_id = m.service_id
			  AND e.snapshot_id = m.next_snapshot_id AND e.kind = 'receipt' AND e.phase = 'current'
			  AND e.reported_at >= m.moved_at
			ORDER BY e.evidence_id DESC LIMIT 1) e ON true
		WHERE m.env_tag = $1 AND m.command_id = $2::uuid AND NOT m.retired
		ORDER BY (m.host || '/' || m.service_id) COLLATE "C"`, envTag, a.cmdID)
	if err != nil {
		return dbErr("read moved targets' receipts", err)
	}
	defer rows.Close()
	var id, result, reason string
	rejected, missing := textlist.First{N: GateListed}, textlist.First{N: GateListed}
	for rows.Next() {
		if err := rows.Scan(&id, &result, &reason); err != nil {
			return dbErr("read moved targets' receipts", err)
		}
		v.Moved++
		if result == bundle.ResultRejected {
			rejected.Add(fmt.Sprintf("%s (%s)", id, reason))
		}
		if result != bundle.ResultApplied {
			missing.Add(id)
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr("read moved targets' receipts", err)
	}
	v.Rejected, v.RejectedCount = rejected.Items, rejected.Count
	v.Missing, v.MissingCount = missing.Items, missing.Count
	return nil
}

// markPassed journals, once, that the release's soak ended below every
// threshold.
func (s *Store) markPassed(ctx context.Context, envTag string, a *activationFacts, v *GateVerdict) error {
	cmd := command{ID: uuid.NewSHA1(uuid.NameSpaceOID, []byte("configpub/health-gate-passed/"+envTag+"/"+a.cmdID)).String()}
	h := newHasher("health-gate-passed")
	h.str(envTag)
	h.str(a.cmdID)
	cmd.Hash = h.sum()
	return s.runTx(ctx, func(tx pgx.Tx) error {
		now := s.now()
		e, err := lockExistingEnv(ctx, tx, envTag)
		if err != nil {
			return err
		}
		if e.Current != a.release || e.Pending != 0 {
			return nil // moved on meanwhile
		}
		r, err := lockRelease(ctx, tx, envTag, a.release)
		if err != nil {
			return err
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.config_release_journal
			WHERE env_tag = $1 AND release_version = $2 AND command_id = $3::uuid)`, envTag, a.release, cmd.ID).Scan(&done); err != nil {
			return dbErr("read health-gate journal", err)
		}
		if done {
			return nil
		}
		return mutate(ctx, tx, r, event{Kind: "health-gate-passed", ToState: r.State, ToOutcome: r.Outcome,
			CommandID: cmd.ID, Hash: cmd.Hash, Actor: HealthGateActor, RecordedAt: now,
			Reason:   fmt.Sprintf("soak of %s ended below every threshold", a.rollout.HealthGate.Soak),
			Evidence: map[string]any{"moved": v.Moved, "rejected": v.RejectedCount, "missing": v.MissingCount}})
	})
}

// WatchHealth runs CheckHealth for every environment in envTags every
// poll (default 1 s) until ctx ends, logging each rollback and pass. It
// returns ctx's error; a failed check is logged and retried. Before each
// round, next (when not nil) returns the store to check with: a store
// signing with a rotated key, so that a rollback is signed with it.
func (s *Store) WatchHealth(ctx context.Context, envTags []string, poll time.Duration, log *slog.Logger, next func(*Store) *Store) error {
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if next != nil {
			s = next(s)
		}
		if err := s.checkHealthRound(ctx, envTags, log); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// checkHealthRound is one round of WatchHealth: CheckHealth of each of
// envTags, logging a rollback, a pass and a failed check (a failure does
// not stop the round). It returns ctx's error once ctx ends, else nil.
func (s *Store) checkHealthRound(ctx context.Context, envTags []string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, env := range envTags {
		// Not CheckHealth: a running gate may be started before an
		// environment's first release, and watches it from then on.
		v, err := s.checkHealth(ctx, env)
		if err != nil {
			err = fmt.Errorf("health gate %s: %w", env, err)
		}
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.WarnContext(ctx, "health gate check failed", "env", env, "err", err)
		case v.Verdict == GateRolledBack:
			log.InfoContext(ctx, "health gate rolled back", "env", env, "from", v.Release, "to", v.Previous, "reason", v.Reason)
		case v.Verdict == GatePassed:
			log.InfoContext(ctx, "health gate passed", "env", env, "release", v.Release)
		}
	}
	return nil
}
