package promote_test

import (
	"context"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestPromoteStageBreakGlassRerunIsTheSameCommand: `promote --stage
// --break-glass --reason R` inside a freeze window journals "break-glass in
// freeze window NAME: R". The staging's command hash covered that
// journaled text, which promote computed from its clock, so re-running the
// same promotion (the same command id, derived from the commit) once the
// window had closed — after a crash between the COMMIT and its answer, or
// to check what happened — hashed R alone and was refused as a conflict
// with the command it repeats. The hash now covers what the operator gave;
// the store settles, under the environment's lock, which window (if any)
// was broken and journals it. Re-run in the window and four simulated days
// later, after it closed, the promotion replays the staging, which stays
// journaled with the window it broke.
func TestPromoteStageBreakGlassRerunIsTheSameCommand(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	opens, c2 := mergeNewYearFreeze(t, h)

	clk := simclock.New(opens.Add(time.Hour))
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(c2)
	o.Store, o.Clock = store, clk.Now
	o.Stage, o.BreakGlass, o.BreakGlassReason = true, true, "INC-7 hotfix"
	const want = `break-glass in freeze window "new-year": INC-7 hotfix`
	journaled := func() string {
		t.Helper()
		var reason string
		if err := h.Pool.QueryRow(ctx, `SELECT reason FROM configpub.config_release_journal
			WHERE env_tag = $1 AND release_version = 2 AND event_kind = 'stage'`, promotertest.Env).Scan(&reason); err != nil {
			t.Fatal(err)
		}
		return reason
	}
	first, err := h.Promote(t, o)
	if err != nil || first.Staged == nil || first.Staged.Replayed {
		t.Fatalf("promote --stage --break-glass in the window: %+v, %v", first, err)
	}
	if got := journaled(); got != want {
		t.Fatalf("staging journaled %q, want %q", got, want)
	}
	for _, at := range []time.Time{opens.Add(2 * time.Hour), opens.Add(4 * 24 * time.Hour)} {
		clk.Set(at)
		again, err := h.Promote(t, o)
		if err != nil {
			t.Fatalf("the same promote --stage --break-glass again at %s: %v, want it replayed", at, err)
		}
		if again.Staged == nil || !again.Staged.Replayed || again.CommandID != first.CommandID {
			t.Fatalf("at %s: %+v, want the staging of command %s replayed", at, again.Staged, first.CommandID)
		}
		if got := journaled(); got != want {
			t.Fatalf("at %s: staging journaled %q, want %q", at, got, want)
		}
	}
	s := promotertest.ReadState(t, h.Pool)
	if s.Current != 1 || s.Counts["config_release"] != 2 {
		t.Fatalf("current %d, %d releases; want release 1 active and release 2 staged once", s.Current, s.Counts["config_release"])
	}
	promotertest.CheckJournal(t, s)
}
