package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
)

// OutcomeReady: a prefetched candidate passed every check; it is held, not
// applied (Prefetch only).
const OutcomeReady Outcome = bundle.ResultReady

// Prefetch fetches the candidate snapshot of the identity's staged release
// (GET /configs?...&configPhase=candidate), verifies it with every check of
// a load — signature, identity, replay and epoch floor, lease, digests,
// strict parse, envelope, activation window — plus one more: the signed
// delivery manifest must be a candidate manifest (phase "candidate") for
// exactly the served snapshot, while a load refuses one
// (MANIFEST_PHASE_MISMATCH). It holds the candidate without applying
// it: the current snapshot, the seen-state and the last-known-good do not
// change. The status endpoint then reports it in its candidate slot, READY
// or REJECTED with the reason, which a control-plane readback records as a
// candidate-phase receipt (two-phase activation waits for READY). The
// evidence's outcome is READY, REJECTED or UNAVAILABLE (NOT_FOUND when
// nothing is staged; CANDIDATE_LEASE_STALE when the candidate manifest's
// lease is expired or not yet valid, which the promoter renews and which
// leaves the candidate slot as it was; CLOCK_SKEW when it is so by this
// runtime's clock only, the answer's Date being off it by more than the
// skew, which leaves the slot as it was too); err is nil exactly when it
// is READY.
func (c *Client) Prefetch(ctx context.Context) (*Evidence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restoreOnce(ctx)
	now := c.opts.Clock.Now()
	ev := c.newEvidence(SourceServer, now)
	err := c.ensureSeen()
	if err == nil {
		err = c.prefetch(ctx, now, ev)
	}
	if err != nil {
		ev.fail(err)
	} else {
		ev.Outcome, ev.Reason = OutcomeReady, ReasonCandidateVerified
	}
	if cur := c.current(); cur != nil {
		ev.CurrentSnapshotID = cur.SnapshotID
	}
	ev.LastKnownGoodSnapshotID = c.lkgSnapshotID
	if ev.Outcome == OutcomeReady || ev.Outcome == OutcomeRejected {
		c.st.noteCandidate(ev)
	}
	c.opts.Logger.Info("config prefetch", "outcome", ev.Outcome, "reason", ev.Reason, "identity", c.opts.Identity.String(),
		"snapshotId", ev.SnapshotID, "artifactDigest", ev.ArtifactDigest)
	return ev, err
}

// ReasonCandidateVerified: a prefetched candidate passed every check.
const ReasonCandidateVerified Reason = "CANDIDATE_VERIFIED"

func (c *Client) prefetch(ctx context.Context, now time.Time, ev *Evidence) error {
	if c.opts.ServerURL == "" {
		return &UnavailableError{Reason: ReasonUnreachable, Err: errors.New("no server URL configured")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.configsURL+"&configPhase=candidate", nil)
	if err != nil {
		return &UnavailableError{Reason: ReasonUnreachable, Err: err}
	}
	req.Header.Set("Accept", "application/yaml")
	if err := c.authorize(ctx, req); err != nil {
		return &UnavailableError{Reason: ReasonTokenUnavailable, Err: err}
	}
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return unavailableStatus(resp)
	}
	// As a load does: the announced snapshot, replaced by the signed value
	// once verified, so that a candidate refused before its manifest is
	// read (an untrusted key) is still reported about the snapshot staged —
	// a receipt without one is not recorded, and the staged release would
	// never fail.
	if sid := resp.Header.Get(HeaderSnapshotID); isUUID(sid) {
		ev.SnapshotID = sid
	}
	v, err := c.verifyResponse(ctx, resp, now, c.seen.floor(), bundle.PhaseCandidate, ev)
	err = c.clockSkew(err, dateOf(resp.Header), now)
	var ve *VerificationError
	if errors.As(err, &ve) && ve.Reason == ReasonClockSkew {
		// Not a verdict on the candidate either, and not the promoter's
		// to renew: this runtime's clock is wrong (a load of the
		// current configuration is refused so too).
		return &UnavailableError{Reason: ReasonClockSkew, Err: errors.New(ve.Error())}
	}
	if errors.As(err, &ve) && strings.HasPrefix(ve.Field, "manifest.") && (ve.Reason == ReasonExpired || ve.Reason == ReasonNotYetValid) {
		// A lease outside its window says nothing about the candidate
		// itself: not a rejection; the next prefetch of a renewed lease
		// decides.
		return &UnavailableError{Reason: ReasonCandidateLease, Err: errors.New(ve.Error())}
	}
	if err != nil {
		return err
	}
	ev.fromSnapshot(v.snap)
	return nil
}

// noteCandidate records a prefetch's result in the candidate slot.
func (s *statusState) noteCandidate(ev *Evidence) {
	s.mu.Lock()
	defer s.mu.Unlock()
	result := bundle.ResultRejected
	if ev.Outcome == OutcomeReady {
		result = bundle.ResultReady
	}
	s.candidate = evidenceState(ev, result, ev.ObservedAt.UTC().Format(time.RFC3339Nano))
}
