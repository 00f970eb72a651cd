package promote_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

// TestPromoteRefusesAClosedWindowBeforePublishing promotes release 1
// (created at gittest.Epoch) against stores whose clocks are past its
// snapshots' activation windows and before them: a promotion that could
// never activate is refused before anything is published or stored —
// at 100,000 targets the publication it spared is most of an hour — while
// a staged release whose window has not opened yet is still staged. A
// check only at the recording would also refuse, after the publication.
func TestPromoteRefusesAClosedWindowBeforePublishing(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	storeAt := func(at time.Time) *promoter.Store {
		s, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	refused := func(name string, at time.Time, stage bool, why string) {
		t.Helper()
		o := h.Options(h.Repo.R1)
		o.Store, o.Stage = storeAt(at), stage
		_, err := h.Promote(t, o)
		var w *promoter.WindowError
		if !errors.Is(err, promoter.ErrOutsideWindow) || !errors.As(err, &w) || !strings.Contains(err.Error(), why) ||
			!strings.Contains(err.Error(), "nothing published") {
			t.Fatalf("%s: %v; want a refusal for the activation window (%s), nothing published", name, err, why)
		}
		if !w.At.Equal(at) || w.SnapshotID == "" || !strings.HasSuffix(w.Identity, "/"+promotertest.Env) {
			t.Fatalf("%s: %+v; want the first target's snapshot at the store's time %s", name, w, at)
		}
		var artifacts, releases int
		if err := h.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM configpub.artifact),
			(SELECT count(*) FROM configpub.config_release)`).Scan(&artifacts, &releases); err != nil {
			t.Fatal(err)
		}
		if writes := h.Registry.Writes(); writes != 0 || artifacts != 0 || releases != 0 {
			t.Fatalf("%s: %d writes to the registry, store %d artifacts and %d releases; want nothing", name, writes, artifacts, releases)
		}
	}
	later := gittest.Epoch.AddDate(20, 0, 0)
	refused("promote after the window", later, false, "its activation window ended at")
	refused("stage after the window", later, true, "its activation window ended at")
	earlier := gittest.Epoch.AddDate(0, 0, -1)
	refused("promote before the window", earlier, false, "its activation window starts at")

	o := h.Options(h.Repo.R1)
	o.Store, o.Stage = storeAt(earlier), true
	res, err := h.Promote(t, o)
	if err != nil || res.Staged == nil {
		t.Fatalf("stage before the window opens: %+v, %v; want release 1 staged", res, err)
	}
	if h.Registry.Writes() == 0 {
		t.Fatal("staged release 1: nothing written to the registry")
	}
}

// TestPromoteChecksOnlyTheReleasesOwnSnapshots promotes release 2 at a
// time inside the activation windows of its own snapshots (from
// gittest.Epoch plus an hour) but before the window of the release-1
// snapshot it keeps for one Agent (the fixture's release 1, from
// 2026-08-13T14:00Z): that target's pointer is already there and does not
// move, so the promotion goes ahead and activates.
func TestPromoteChecksOnlyTheReleasesOwnSnapshots(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(h.Repo.R2)
	o.Store = store
	res, err := h.Promote(t, o)
	if err != nil || res.Activation == nil || res.Activation.ReleaseVersion != 2 {
		t.Fatalf("promote release 2 at %s: %+v, %v; want it active", at, res, err)
	}
	var kept int
	if err := h.Pool.QueryRow(ctx, `SELECT count(*) FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1 AND s.valid_from > $2`, promotertest.Env, at).Scan(&kept); err != nil || kept == 0 {
		t.Fatalf("%d current pointers at a snapshot whose window opens after %s (%v); want release 2's kept release-1 snapshot", kept, at, err)
	}

	// Re-run after every window ended: the release is already recorded, so
	// the promotion replays it and nothing is checked or refused.
	later := gittest.Epoch.AddDate(20, 0, 0)
	o.Store, err = promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: func() time.Time { return later }})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := h.Promote(t, o); err != nil || again.Activation == nil || !again.Activation.Replayed {
		t.Fatalf("promote release 2 again at %s: %+v, %v; want it replayed", later, again, err)
	}
}
