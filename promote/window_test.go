package promote_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promote"
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

// TestRenewBeforeKeepsARollbackTargetOverMonths runs the whole pipeline —
// compile, a reviewed merge, promote into PostgreSQL and the registry —
// over 70 simulated days on the store's injected clock, with the dev lease
// profile cut to three-week windows: a change to the environment every 9
// days and a daily compile --renew (Renew) in between, each release it
// writes merged and promoted that day. After every promotion the on-call
// engineer rolls back to the release before and activates the new one
// again. With renewBefore 168h every such rollback is accepted — also with
// renewSpread 168h, whose renewals re-issue the fixture's hosts on days of
// their own; without it a renewal comes only once windows have ended, and
// the rollback after it is refused: for a while there was no release to
// roll back to.
func TestRenewBeforeKeepsARollbackTargetOverMonths(t *testing.T) {
	const day = 24 * time.Hour
	for _, renewBefore := range []string{"", "168h", "168h spread"} {
		t.Run("renewBefore="+renewBefore, func(t *testing.T) {
			t.Parallel()
			h := promotertest.New(t)
			ctx := context.Background()
			// Releases 1 and 2 keep snapshots of the fixture's release
			// (from 2026-08-13, for ten years).
			now := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
			store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			promoteAt := func(commit plumbing.Hash) *promote.Result {
				t.Helper()
				o := h.Options(commit)
				o.Store = store
				res, err := h.Promote(t, o)
				if err != nil || res.Activation == nil {
					t.Fatalf("promote at %s: %+v, %v", now.Format(time.RFC3339), res, err)
				}
				return res
			}
			promoteAt(h.Repo.R1)
			promoteAt(h.Repo.R2)

			files := h.Repo.Git.Files(h.Repo.R2)
			profile := "validFor: 504h\n      refreshAfter: 168h"
			if before, spread := strings.CutSuffix(renewBefore, " spread"); renewBefore != "" {
				profile += "\n      renewBefore: " + before
				if spread {
					// Each host renewed on a day of the week of its own.
					profile += "\n      renewSpread: 168h"
				}
			}
			promotertest.Replace(t, files, "configpub.yaml", "validFor: 87600h      # ten years\n      refreshAfter: 720h", profile)
			start := now.Add(time.Hour)
			level := "INFO"
			var accepted, refused, renewals int
			for d := 0; d <= 70; d++ {
				now = start.Add(time.Duration(d) * day)
				change := d%9 == 0 // day 0: the lease profile itself
				if change && d > 0 {
					next := map[string]string{"INFO": "DEBUG", "DEBUG": "INFO"}[level]
					promotertest.Replace(t, files, "environments/"+promotertest.Env+".yaml", "level: "+level, "level: "+next)
					level = next
				}
				compiled, res := promotertest.CompiledFilesWith(t, files, compiler.Options{CreatedAt: now, Renew: !change})
				if res.Unchanged() {
					if change {
						t.Fatalf("day %d: a change wrote no release", d)
					}
					continue
				}
				if !change {
					renewals++
				}
				files = compiled
				v := res.Manifest.ReleaseVersion
				branch := fmt.Sprintf("release-%d", v)
				h.Repo.Git.Commit(gittest.Commit{Branch: branch, From: h.Repo.Git.Tip(gittest.Main), Files: files, Message: branch})
				merge := h.Repo.Git.Merge(gittest.Main, branch, gittest.Commit{Message: "Merge " + branch,
					Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
				act := promoteAt(merge).Activation
				if act.ReleaseVersion != v || act.PreviousRelease != v-1 {
					t.Fatalf("day %d: release %d replaced %d, want %d replacing %d", d, act.ReleaseVersion, act.PreviousRelease, v, v-1)
				}
				// The store tells a renewal from a change by the sources
				// digest recorded with each release (status's RENEWAL).
				st, err := store.StatusHead(ctx, promotertest.Env)
				if err != nil {
					t.Fatal(err)
				}
				if r := st.Releases[len(st.Releases)-1]; r.ReleaseVersion != v || r.Renewal == change {
					t.Errorf("day %d: release %d (newest %d) a renewal in status: %v; want %v", d, v, r.ReleaseVersion, r.Renewal, !change)
				}
				_, err = store.Rollback(ctx, promoter.RollbackInput{CommandID: promotertest.ID("rollback", renewBefore, v),
					EnvTag: promotertest.Env, ToRelease: v - 1, Actor: "oncall", Reason: "drill"})
				switch {
				case errors.Is(err, promoter.ErrOutsideWindow):
					refused++
					if u := act.PreviousActivatableUntil; u == nil || u.After(now) {
						t.Errorf("day %d: the rollback to release %d was refused, yet the promotion said it could be returned to until %v", d, v-1, u)
					}
					continue
				case err != nil:
					t.Fatalf("day %d: rollback to release %d: %v", d, v-1, err)
				}
				accepted++
				if _, err := store.Activate(ctx, promoter.MoveInput{CommandID: promotertest.ID("forward", renewBefore, v),
					EnvTag: promotertest.Env, Release: v, Actor: "oncall", Reason: "drill over"}); err != nil {
					t.Fatalf("day %d: forward to release %d: %v", d, v, err)
				}
			}
			t.Logf("renewBefore %q: %d renewals; rollbacks after a promotion: %d accepted, %d refused", renewBefore, renewals, accepted, refused)
			if renewals == 0 || accepted == 0 {
				t.Fatalf("%d renewals and %d accepted rollbacks in 70 days: the test exercised nothing", renewals, accepted)
			}
			if renewBefore != "" && refused != 0 {
				t.Errorf("renewBefore %s: %d rollbacks refused; want none", renewBefore, refused)
			}
			if renewBefore == "" && refused == 0 {
				t.Error("without renewBefore no rollback was refused: the late renewal this guards against did not happen")
			}
		})
	}
}

// TestPromoteRefusesARevokedSnapshotBeforePublishing: release 2 keeps a
// release-1 snapshot that was revoked since. The recording refuses it; the
// promotion now refuses it before publishing, so none of release 2's tags
// are pushed — a corrected release 2 met the refused one's tags as a
// conflict and had to be published under another prefix.
func TestPromoteRefusesARevokedSnapshotBeforePublishing(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	var kept string
	for id, snap := range h.Repo.Snapshots[h.Repo.R2] {
		if h.Repo.Snapshots[h.Repo.R1][id] == snap {
			kept = snap
		}
	}
	if kept == "" {
		t.Fatal("release 2 of the fixture keeps no release-1 snapshot")
	}
	if _, err := h.Pool.Exec(ctx, `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		VALUES ($1, 'leaked', 'security', now())`, kept); err != nil {
		t.Fatal(err)
	}
	writes := h.Registry.Writes()
	_, err := h.Promote(t, h.Options(h.Repo.R2))
	if !errors.Is(err, promoter.ErrRevoked) || !strings.Contains(err.Error(), kept) || !strings.Contains(err.Error(), "nothing published") {
		t.Fatalf("promote of a release keeping a revoked snapshot: %v; want ErrRevoked naming %s, nothing published", err, kept)
	}
	if w := h.Registry.Writes() - writes; w != 0 {
		t.Fatalf("the refused promotion wrote %d times to the registry, want none", w)
	}
}
