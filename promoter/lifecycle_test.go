package promoter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
)

const day = 24 * time.Hour

// releaseOf is release `version` of env on base with exactly the given
// targets (the complete target mapping).
func releaseOf(env string, version, base int64, ts ...promoter.Target) promoter.ReleaseInput {
	in := release(env, version, base, 1, nil, nil)
	in.Targets = ts
	return in
}

// pointerRow is one current_pointer row as the tests see it.
type pointerRow struct {
	Snapshot string
	Sequence int64
	Retired  bool
	Manifest []byte
	Sig, Key string
}

// pointerRows returns identity (host/serviceId) -> row for env.
func (f *fixture) pointerRows(t testing.TB, env string) map[string]pointerRow {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT host || '/' || service_id, snapshot_id::text, sequence,
		retired_at IS NOT NULL, manifest, manifest_signature, manifest_key_id
		FROM configpub.current_pointer WHERE env_tag = $1`, env)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]pointerRow{}
	for rows.Next() {
		var k string
		var r pointerRow
		if err := rows.Scan(&k, &r.Snapshot, &r.Sequence, &r.Retired, &r.Manifest, &r.Sig, &r.Key); err != nil {
			t.Fatal(err)
		}
		m[k] = r
	}
	return m
}

// wantMapping fails unless env's unretired pointers are exactly in's
// targets at in's snapshots and every other pointer is retired, naming
// retired (host/serviceId) exactly.
func (f *fixture) wantMapping(t testing.TB, in promoter.ReleaseInput, retired ...string) {
	t.Helper()
	got := f.pointerRows(t, in.EnvTag)
	live := 0
	for k, r := range got {
		if !r.Retired {
			live++
			continue
		}
		found := false
		for _, want := range retired {
			found = found || want == k
		}
		if !found {
			t.Errorf("release %d: %s is retired, want it live or absent", in.ReleaseVersion, k)
		}
	}
	for _, k := range retired {
		if r, ok := got[k]; !ok || !r.Retired {
			t.Errorf("release %d: %s is not retired (present %v)", in.ReleaseVersion, k, ok)
		}
	}
	if live != len(in.Targets) {
		t.Errorf("release %d: %d live pointers, want %d", in.ReleaseVersion, live, len(in.Targets))
	}
	for _, tg := range in.Targets {
		k := tg.Host + "/" + tg.ServiceID
		if r := got[k]; r.Retired || r.Snapshot != tg.SnapshotID {
			t.Errorf("release %d: %s at %s (retired %v), want %s", in.ReleaseVersion, k, r.Snapshot, r.Retired, tg.SnapshotID)
		}
	}
}

// pointerChecksum digests every current pointer row, pointer_move and
// delivery_manifest of the database: equal before and after means nothing
// moved.
func (f *fixture) pointerChecksum(t testing.TB) string {
	t.Helper()
	var sum string
	if err := f.pool.QueryRow(context.Background(), `SELECT md5(concat_ws('|',
		(SELECT string_agg(p::text, ',' ORDER BY env_tag, host, service_id) FROM configpub.current_pointer p),
		(SELECT count(*) FROM configpub.pointer_move), (SELECT count(*) FROM configpub.delivery_manifest),
		(SELECT string_agg(concat_ws(':', env_tag, release_version, lifecycle_state, row_revision), ','
			ORDER BY env_tag, release_version) FROM configpub.config_release),
		(SELECT string_agg(e::text, ',' ORDER BY env_tag) FROM configpub.environment e)))`).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	return sum
}

func TestForwardFixAfterRollbackBuildsOnTheHead(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	f.now = f.now.Add(minute)
	r2 := release("prod", 2, 1, 3, func(i int) bool { return i != 2 }, func(int) int64 { return 1 })
	f.promote(t, r2)
	f.now = f.now.Add(minute)
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb"), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "bad limits"}); err != nil {
		t.Fatal(err)
	}
	f.wantMapping(t, r1)

	// Re-running release 2's promotion replays it, says it is rolled back
	// and release 1 is active, and moves nothing.
	f.now = f.now.Add(minute)
	before := f.pointerChecksum(t)
	again, err := f.store.RecordAndActivate(ctx, r2)
	if err != nil {
		t.Fatalf("re-run of release 2's promotion: %v", err)
	}
	if !again.Replayed || again.StateNow != promoter.StateRolledBack || again.ActiveRelease != 1 {
		t.Fatalf("re-run got replayed %v state %q active %d, want a replay reporting ROLLED_BACK and release 1 active",
			again.Replayed, again.StateNow, again.ActiveRelease)
	}
	if got := f.pointerChecksum(t); got != before {
		t.Fatal("re-running a rolled-back release's promotion moved something")
	}
	f.wantMapping(t, r1)

	// A release built on the active release 1 instead of the head 2 is stale.
	bad := release("prod", 3, 1, 3, nil, nil)
	bad.CommandID = id("cmd", "bad-base")
	_, err = f.store.RecordAndActivate(ctx, bad)
	var cas *promoter.CASError
	if !errors.As(err, &cas) || !errors.Is(err, promoter.ErrStale) || cas.Expected != 1 || cas.Actual != 2 || cas.Active != 1 ||
		!strings.Contains(err.Error(), "the latest recorded release is 2 (release 1 is active); recompile on release 2") {
		t.Fatalf("release 3 on base 1: got %v, want a stale CASError naming head 2 and active 1", err)
	}
	if got := f.pointerChecksum(t); got != before {
		t.Fatal("a refused promotion moved something")
	}

	// The forward fix: release 3 on base 2 (the head) activates, every
	// pointer on it, although release 1 is the active one.
	r3 := release("prod", 3, 2, 3, func(i int) bool { return i == 0 }, func(i int) int64 { return int64(3 - i) })
	res := f.promote(t, r3)
	if res.PreviousRelease != 1 || res.Moved != 2 || res.Unchanged != 1 || res.Retired != 0 {
		t.Fatalf("release 3 got %+v, want from release 1, 2 moved (host 0 new, host 1 to release 2's), 1 unchanged", res)
	}
	f.wantMapping(t, r3)
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	wantStates := []string{promoter.StateSuperseded, promoter.StateRolledBack, promoter.StateActive}
	if st.CurrentRelease != 3 || len(st.Releases) != 3 {
		t.Fatalf("got current %d with %d releases, want 3 and 3", st.CurrentRelease, len(st.Releases))
	}
	for i, r := range st.Releases {
		if r.State != wantStates[i] {
			t.Errorf("release %d is %s, want %s", r.ReleaseVersion, r.State, wantStates[i])
		}
	}
	again, err = f.store.RecordAndActivate(ctx, r2)
	if err != nil || !again.Replayed || again.StateNow != promoter.StateRolledBack || again.ActiveRelease != 3 {
		t.Fatalf("re-run of release 2 after release 3: got %+v, %v; want a replay reporting ROLLED_BACK, release 3 active", again, err)
	}
	f.wantMapping(t, r3)
	f.checkJournal(t)
}

func TestActivationRetiresDroppedTargetsAndMovesRestoreExactMappings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	// Release 1: targets 0, 1, 2. Release 2 changes 0, keeps 1, drops 2
	// and adds 3.
	r1 := releaseOf("prod", 1, 0, target("prod", 0, 1, true), target("prod", 1, 1, true), target("prod", 2, 1, true))
	r2 := releaseOf("prod", 2, 1, target("prod", 0, 2, true), target("prod", 1, 1, false), target("prod", 3, 2, true))
	f.promote(t, r1)
	seqBefore := f.pointerRows(t, "prod")["host-00002/svc"].Sequence
	f.now = f.now.Add(minute)
	res := f.promote(t, r2)
	if res.Moved != 2 || res.Unchanged != 1 || res.Retired != 1 {
		t.Fatalf("release 2 got %+v, want 2 moved, 1 unchanged, 1 retired", res)
	}
	f.wantMapping(t, r2, "host-00002/svc")
	dropped := f.pointerRows(t, "prod")["host-00002/svc"]
	if dropped.Snapshot != r1.Targets[2].SnapshotID || dropped.Sequence != seqBefore {
		t.Errorf("retired pointer at %s seq %d, want its last snapshot %s and sequence %d kept",
			dropped.Snapshot, dropped.Sequence, r1.Targets[2].SnapshotID, seqBefore)
	}
	// The retirement is audited.
	hist, err := f.store.History(ctx, "prod", promoter.HistoryFilter{Host: "host-00002"})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.pointer_move WHERE host = 'host-00002' AND retired
		AND release_version = 2 AND action = 'promote' AND next_snapshot_id = $1::uuid`, r1.Targets[2].SnapshotID); n != 1 ||
		len(hist) != 2 || hist[0].Retired || !hist[1].Retired || hist[1].ReleaseVersion != 2 {
		t.Errorf("got %d retirement audit rows, history %+v; want the release 1 move, then the retirement by release 2", n, hist)
	}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, tg := range st.Targets {
		states[tg.Host] = tg.State
	}
	if states["host-00002"] != promoter.TargetRetired || states["host-00003"] == promoter.TargetRetired {
		t.Errorf("got states %v, want host-00002 RETIRED and host-00003 not", states)
	}

	// A retired identity gets no lease renewal.
	f.now = f.now.Add(4 * minute)
	ren, err := f.store.RenewLeases(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if ren.Renewed != 3 {
		t.Errorf("renewed %d leases, want 3 (the retired identity is not renewed)", ren.Renewed)
	}
	if got := f.pointerRows(t, "prod")["host-00002/svc"]; string(got.Manifest) != string(dropped.Manifest) {
		t.Error("the retired identity's manifest was re-signed by a renewal")
	}

	// Rollback to 1 restores exactly release 1's mapping: the dropped
	// identity comes back (with a higher sequence), the added one retires.
	f.now = f.now.Add(minute)
	res, err = f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb"), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "restore"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 2 || res.Unchanged != 1 || res.Retired != 1 {
		t.Fatalf("rollback got %+v, want 2 moved (host 0 back, host 2 restored), 1 unchanged, 1 retired", res)
	}
	f.wantMapping(t, r1, "host-00003/svc")
	back := f.pointerRows(t, "prod")["host-00002/svc"]
	m, err := bundle.ParseDeliveryManifest(back.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if back.Sequence <= seqBefore || m.Sequence != back.Sequence || m.ActivatedAt != "2026-11-29T12:06:00.000Z" {
		t.Errorf("restored identity: sequence %d (manifest %d, activatedAt %s), want above %d and activated 12:06",
			back.Sequence, m.Sequence, m.ActivatedAt, seqBefore)
	}

	// Forward activation restores exactly release 2's.
	f.now = f.now.Add(minute)
	res, err = f.store.Activate(ctx, promoter.MoveInput{CommandID: moveID("fwd"), EnvTag: "prod", Release: 2,
		Actor: "oncall", Reason: "fixed"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 2 || res.Retired != 1 {
		t.Fatalf("forward activation got %+v, want 2 moved, 1 retired", res)
	}
	f.wantMapping(t, r2, "host-00002/svc")
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE retired"); n != 3 {
		t.Errorf("got %d retirement audit rows, want 3", n)
	}
	f.checkJournal(t)
}

// windowed gives every target of in the activation window
// [createdAt, createdAt+life).
func windowed(in promoter.ReleaseInput, life time.Duration) promoter.ReleaseInput {
	for i := range in.Targets {
		t := &in.Targets[i]
		t.ValidFrom, t.ExpiresAt = t.CreatedAt, t.CreatedAt.Add(life)
	}
	return in
}

// windowOf is when every target of in can be moved to it: the latest
// start and the earliest end of its snapshots' activation windows.
func windowOf(in promoter.ReleaseInput) (from, until time.Time) {
	for i, t := range in.Targets {
		if i == 0 || t.ValidFrom.After(from) {
			from = t.ValidFrom
		}
		if i == 0 || t.ExpiresAt.Before(until) {
			until = t.ExpiresAt
		}
	}
	return from, until
}

// activatable returns release version's ActivatableFrom and
// ActivatableUntil as status reports them, failing when either is unset.
func (f *fixture) activatable(t testing.TB, env string, version int64) (from, until time.Time) {
	t.Helper()
	st, err := f.store.StatusHead(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Releases {
		if r.ReleaseVersion != version {
			continue
		}
		if r.ActivatableFrom == nil || r.ActivatableUntil == nil {
			t.Fatalf("status of release %d: activatable from %v until %v, want both", version, r.ActivatableFrom, r.ActivatableUntil)
		}
		return *r.ActivatableFrom, *r.ActivatableUntil
	}
	t.Fatalf("status has no release %d", version)
	return
}

// wantActivatable fails unless status reports in's window (windowOf).
func (f *fixture) wantActivatable(t testing.TB, in promoter.ReleaseInput) {
	t.Helper()
	wantFrom, wantUntil := windowOf(in)
	from, until := f.activatable(t, in.EnvTag, in.ReleaseVersion)
	if !from.Equal(wantFrom) || !until.Equal(wantUntil) || from.Location() != time.UTC || until.Location() != time.UTC {
		t.Errorf("status of release %d: activatable from %s until %s, want %s until %s (UTC)", in.ReleaseVersion,
			from, until, wantFrom, wantUntil)
	}
}

// promoteWindowed promotes two releases of prod with activation windows of
// life: release 1 (snapshots created t0+1h) at t0+1h, release 2 (target 0
// created t0+2h, target 1 kept from release 1) at t0+2h.
func (f *fixture) promoteWindowed(t testing.TB, life time.Duration) (r1, r2 promoter.ReleaseInput) {
	t.Helper()
	r1 = windowed(release("prod", 1, 0, 2, nil, nil), life)
	r2 = windowed(release("prod", 2, 1, 2, func(i int) bool { return i == 0 }, func(int) int64 { return 1 }), life)
	f.now = t0.Add(time.Hour)
	f.promote(t, r1)
	f.now = t0.Add(2 * time.Hour)
	f.promote(t, r2)
	return r1, r2
}

func TestActivationWindowOverMonths(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	const life = 21 * day // the production profile's envelope window
	r1, r2 := f.promoteWindowed(t, life)
	activated := f.now
	// Status says until when each release can be activated in whole:
	// release 2 only as long as the snapshot it kept from release 1.
	f.wantActivatable(t, r1)
	f.wantActivatable(t, r2)
	if _, until2 := windowOf(r2); !until2.Equal(r1.Targets[1].ExpiresAt) {
		t.Fatalf("release 2's window ends %s, want the end of the snapshot it kept (%s)", until2, r1.Targets[1].ExpiresAt)
	}

	var refused bool
	for d := 1; d <= 120; d++ {
		f.now = activated.Add(time.Duration(d) * day)
		// Renewals are never refused by the activation window: the
		// unchanged target 1 (created t0+1h) keeps running for months.
		ren, err := f.store.RenewLeases(ctx, "prod")
		if err != nil || ren.Renewed != 2 {
			t.Fatalf("day %d: renew got %+v, %v; want 2 renewed", d, ren, err)
		}
		for k, r := range f.pointerRows(t, "prod") {
			m, err := bundle.ParseDeliveryManifest(r.Manifest)
			if err != nil {
				t.Fatal(err)
			}
			if m.IssuedAt != f.now.Format("2006-01-02T15:04:05.000Z") {
				t.Fatalf("day %d: %s manifest issued %s, want now", d, k, m.IssuedAt)
			}
		}
		if d == 10 {
			// Inside the window a rollback and a forward activation work,
			// and status says so.
			if _, until := f.activatable(t, "prod", 1); !f.now.Before(until) {
				t.Fatalf("day 10: status says release 1 was activatable until %s", until)
			}
			rb, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb10"), EnvTag: "prod",
				ToRelease: 1, Actor: "oncall", Reason: "day 10"})
			if err != nil {
				t.Fatalf("day 10 rollback: %v", err)
			}
			f.wantMapping(t, r1)
			fw, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: moveID("fw10"), EnvTag: "prod",
				Release: 2, Actor: "oncall", Reason: "day 10"})
			if err != nil {
				t.Fatalf("day 10 forward activation: %v", err)
			}
			f.wantMapping(t, r2)
			// Each move says until when the release it replaced can be
			// moved back to: its window as status shows it.
			_, until1 := windowOf(r1)
			_, until2 := windowOf(r2)
			if u := rb.PreviousActivatableUntil; rb.PreviousRelease != 2 || u == nil || !u.Equal(until2) {
				t.Errorf("day 10 rollback: previous release %d until %v, want 2 until %s", rb.PreviousRelease, u, until2)
			}
			if u := fw.PreviousActivatableUntil; fw.PreviousRelease != 1 || u == nil || !u.Equal(until1) {
				t.Errorf("day 10 forward activation: previous release %d until %v, want 1 until %s", fw.PreviousRelease, u, until1)
			}
		}
		if d == 30 {
			// Past the window a rollback to release 1 is refused, naming
			// the release and the date; nothing moves. Status said so.
			if _, until := f.activatable(t, "prod", 1); f.now.Before(until) {
				t.Fatalf("day 30: status says release 1 is activatable until %s", until)
			}
			before := f.pointerChecksum(t)
			_, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb30"), EnvTag: "prod",
				ToRelease: 1, Actor: "oncall", Reason: "day 30"})
			var w *promoter.WindowError
			if !errors.As(err, &w) || !errors.Is(err, promoter.ErrOutsideWindow) || w.Release != 1 ||
				!strings.Contains(err.Error(), "release 1 cannot be activated on "+f.now.Format("2006-01-02T15:04:05.000Z")) ||
				!strings.Contains(err.Error(), "its activation window ended at "+r1.Targets[0].ExpiresAt.Format("2006-01-02T15:04:05.000Z")) {
				t.Fatalf("day 30 rollback: got %v, want a WindowError naming release 1, the date and the window's end", err)
			}
			if got := f.pointerChecksum(t); got != before {
				t.Fatal("a rollback refused by the activation window moved something")
			}
			if n := f.count(t, "SELECT count(*) FROM configpub.command WHERE command_id = $1::uuid", moveID("rb30")); n != 0 {
				t.Errorf("the refused rollback left %d command rows", n)
			}
			refused = true

			// A new release whose changed target is fresh activates; its
			// unchanged target stays on release 1's snapshot (no move, so
			// no window check) and keeps being served.
			r3 := release("prod", 3, 2, 2, func(i int) bool { return i == 0 }, func(int) int64 { return 1 })
			r3.Targets[0].CreatedAt = f.now.Add(-time.Hour)
			r3 = windowed(r3, life)
			stale := r3
			stale.CommandID = id("cmd", "stale-3")
			stale.Targets = append([]promoter.Target(nil), r3.Targets...)
			stale.Targets[0].ValidFrom = t0
			stale.Targets[0].ExpiresAt = t0.Add(life)
			stale.Targets[0].SnapshotID = id("snap", "stale")
			if _, err := f.store.RecordAndActivate(ctx, stale); !errors.Is(err, promoter.ErrOutsideWindow) {
				t.Fatalf("promotion with a snapshot past its window: got %v, want ErrOutsideWindow", err)
			}
			if n := f.count(t, "SELECT count(*) FROM configpub.config_release WHERE release_version = 3"); n != 0 {
				t.Fatalf("a refused promotion recorded release 3 (%d rows)", n)
			}
			res := f.promote(t, r3)
			if res.Moved != 1 || res.Unchanged != 1 {
				t.Fatalf("release 3 got %+v, want 1 moved, 1 unchanged", res)
			}
			f.wantMapping(t, r3)
			f.wantActivatable(t, r3)
		}
	}
	if !refused {
		t.Fatal("the day-30 rollback was never tried")
	}
	f.checkJournal(t)
}

func TestRaiseEpochResignsEveryPointerAndIsNeverLowered(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	before := f.pointerRows(t, "prod")
	f.now = f.now.Add(minute)
	in := promoter.EpochInput{CommandID: moveID("ep5"), EnvTag: "prod", Epoch: 5, Actor: "sec", Reason: "key leak"}
	res, err := f.store.RaiseEpoch(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 0 || res.To != 5 || res.Resigned != 3 || res.Release != 1 {
		t.Fatalf("got %+v, want 0 -> 5, 3 re-signed on release 1", res)
	}
	pub, err := signing.NewTrustedKey(&f.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for k, r := range f.pointerRows(t, "prod") {
		if _, err := signing.VerifyBlob([]signing.TrustedKey{pub}, r.Manifest, r.Sig, r.Key); err != nil {
			t.Fatalf("%s: re-signed manifest: %v", k, err)
		}
		m, err := bundle.ParseDeliveryManifest(r.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		if m.RevocationEpoch != 5 || r.Sequence <= before[k].Sequence || r.Snapshot != before[k].Snapshot ||
			m.ActivatedAt != "2026-11-29T12:00:00.000Z" || m.IssuedAt != "2026-11-29T12:01:00.000Z" {
			t.Errorf("%s: got epoch %d seq %d (was %d) activated %s issued %s, want epoch 5, a higher sequence, the same snapshot and activatedAt",
				k, m.RevocationEpoch, r.Sequence, before[k].Sequence, m.ActivatedAt, m.IssuedAt)
		}
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind = 'resign'"); n != 3 {
		t.Errorf("got %d re-sign manifests, want 3", n)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE event_kind = 'raise-epoch'
		AND release_version = 1 AND evidence->>'toEpoch' = '5'`); n != 1 {
		t.Errorf("got %d journal rows for the raise, want 1", n)
	}
	again, err := f.store.RaiseEpoch(ctx, in)
	if err != nil || !again.Replayed || again.Resigned != 3 {
		t.Fatalf("same command again: got %+v, %v; want a replay", again, err)
	}
	for _, e := range []int64{5, 3} {
		_, err := f.store.RaiseEpoch(ctx, promoter.EpochInput{CommandID: id("epoch", e), EnvTag: "prod", Epoch: e, Actor: "sec", Reason: "r"})
		if !errors.Is(err, promoter.ErrInvalid) || !strings.Contains(err.Error(), "never lowered") {
			t.Errorf("epoch %d after 5: got %v, want ErrInvalid (never lowered)", e, err)
		}
	}
	if _, err := f.store.RaiseEpoch(ctx, promoter.EpochInput{CommandID: moveID("nosuch"), EnvTag: "nosuch", Epoch: 9,
		Actor: "sec", Reason: "r"}); !errors.Is(err, promoter.ErrNotFound) {
		t.Errorf("epoch of an environment that does not exist: got %v, want ErrNotFound", err)
	}
	// Every later move and renewal signs at least the raised epoch.
	f.now = f.now.Add(minute)
	f.promote(t, release("prod", 2, 1, 3, func(i int) bool { return i == 0 }, func(int) int64 { return 1 }))
	f.now = f.now.Add(minute)
	if _, err := f.store.RenewLeases(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.delivery_manifest
		WHERE (convert_from(manifest, 'UTF8')::jsonb->>'revocationEpoch')::int <> 5 AND kind <> 'move'`); n != 0 {
		t.Errorf("%d renewal or re-sign manifests after the raise carry another epoch", n)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.current_pointer
		WHERE (convert_from(manifest, 'UTF8')::jsonb->>'revocationEpoch')::int <> 5`); n != 0 {
		t.Errorf("%d current manifests carry an epoch other than 5", n)
	}
}

// TestActivationWindowOfReleasesRecordedBeforeItsMigration: releases
// recorded before the schema kept their activation windows get them from
// the migration that adds them, a release recorded after from the trigger,
// and a mapping inserted in two statements narrows its window with each.
func TestActivationWindowOfReleasesRecordedBeforeItsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewAt(t, 23)
	f := &fixture{db: db, pool: db.Pool(t), key: newKey(t), now: t0}
	f.store = f.open(t, promoter.AllowSchemaBehind)
	const life = 21 * day
	r1, r2 := f.promoteWindowed(t, life)

	migrateToLatest(t, db)
	f.wantActivatable(t, r1)
	f.wantActivatable(t, r2)

	// Release 3 is release 2's mapping inserted in two statements: first
	// the snapshot kept from release 1 (the earlier window), then release
	// 2's own (starts and ends later). Its window starts with the later
	// and ends with the earlier.
	if _, err := f.pool.Exec(ctx, `INSERT INTO configpub.config_release (env_tag, release_version, base_release_version,
			row_revision, lifecycle_state, execution_outcome, definition, definition_hash, actor, target_count, command_id,
			last_command_id, created_at, updated_at)
		VALUES ('prod', 3, 2, 1, 'RECORDED', 'NOT_REQUESTED', 'x'::bytea, 'sha256:' || encode(sha256('x'::bytea), 'hex'),
			'test', 2, gen_random_uuid(), gen_random_uuid(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	for _, tg := range []promoter.Target{r2.Targets[1], r2.Targets[0]} {
		if _, err := f.pool.Exec(ctx, `INSERT INTO configpub.config_release_target (env_tag, release_version, host,
				service_id, snapshot_id, changed, lease_profile, refresh_after_ms, expires_after_ms)
			SELECT env_tag, 3, host, service_id, snapshot_id, false, lease_profile, refresh_after_ms, expires_after_ms
			FROM configpub.config_release_target WHERE env_tag = 'prod' AND release_version = 2 AND host = $1 AND service_id = $2`,
			tg.Host, tg.ServiceID); err != nil {
			t.Fatal(err)
		}
	}
	r3 := r2
	r3.ReleaseVersion = 3
	f.wantActivatable(t, r3)

	// A release promoted after the migration.
	r4 := windowed(release("prod", 4, 3, 2, func(i int) bool { return i == 1 }, func(int) int64 { return 2 }), life)
	f.now = t0.Add(3 * day)
	f.promote(t, r4)
	f.wantActivatable(t, r4)
}

// TestMovesSayUntilTheReplacedReleaseCanBeReturnedTo: a promotion, a
// rollback and a forward activation each report the end of the activation
// window of the release they replaced, read from the store, so that the
// operator learns at the move until when it can be undone by a move back.
func TestMovesSayUntilTheReplacedReleaseCanBeReturnedTo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := windowed(release("prod", 1, 0, 2, nil, nil), 21*day) // created t0+1h
	r2 := release("prod", 2, 1, 2, nil, nil)
	for i := range r2.Targets { // every target re-created five days later
		r2.Targets[i].CreatedAt = r2.Targets[i].CreatedAt.Add(5 * day)
	}
	r2 = windowed(r2, 21*day)
	_, until1 := windowOf(r1)
	_, until2 := windowOf(r2)
	if until1.Equal(until2) {
		t.Fatal("the two releases' windows end together: the test could not tell them apart")
	}
	want := func(what string, res *promoter.ActivationResult, prev int64, until time.Time) {
		t.Helper()
		if u := res.PreviousActivatableUntil; res.PreviousRelease != prev || u == nil || !u.Equal(until) {
			t.Errorf("%s: replaced release %d, window until %v; want release %d until %s", what, res.PreviousRelease, u, prev, until)
		}
	}
	f.now = t0.Add(time.Hour)
	if res := f.promote(t, r1); res.PreviousRelease != 0 || res.PreviousActivatableUntil != nil {
		t.Errorf("the first promotion replaced release %d until %v", res.PreviousRelease, res.PreviousActivatableUntil)
	}
	f.now = t0.Add(5*day + 3*time.Hour)
	want("promotion of release 2", f.promote(t, r2), 1, until1)
	f.now = t0.Add(6 * day)
	rb, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb"), EnvTag: "prod", ToRelease: 1, Actor: "oncall", Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	want("rollback to release 1", rb, 2, until2)
	f.now = until1.Add(day) // release 1's window ended, release 2's has not
	fw, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: moveID("fw"), EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	want("forward activation of release 2", fw, 1, until1)
	if fw.ActivatedAt.Before(until1) {
		t.Errorf("activated at %s, before release 1's window ended (%s)", fw.ActivatedAt, until1)
	}
}

// TestReleaseSourcesDigest: a release is recorded with the digest of the
// sources it was compiled from, which then never changes; a malformed one
// is refused; a database before the column (a binary ahead of its
// migration) records the release without it.
func TestReleaseSourcesDigest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewAt(t, 24)
	f := &fixture{db: db, pool: db.Pool(t), key: newKey(t), now: t0}
	f.store = f.open(t, promoter.AllowSchemaBehind)
	sources := "sha256:" + strings.Repeat("5", 64)
	r1 := release("prod", 1, 0, 3, func(int) bool { return true }, nil)
	r1.SourcesDigest = sources
	f.promote(t, r1)
	if st, err := f.store.Status(ctx, "prod"); err != nil || st.Releases[0].Renewal {
		t.Fatalf("status before the sources digest is recorded: %v (%+v), want release 1 not a renewal", err, st)
	}

	migrateToLatest(t, db)
	bad := release("prod", 2, 1, 3, func(int) bool { return false }, func(int) int64 { return 1 })
	bad.SourcesDigest = "sha256:" + strings.Repeat("5", 63)
	if _, err := f.store.RecordAndActivate(ctx, bad); !errors.Is(err, promoter.ErrInvalid) || !strings.Contains(err.Error(), "sourcesDigest") {
		t.Fatalf("a malformed sources digest: %v, want ErrInvalid naming sourcesDigest", err)
	}
	r2 := release("prod", 2, 1, 3, func(int) bool { return false }, func(int) int64 { return 1 })
	r2.SourcesDigest = sources
	f.promote(t, r2)
	got := map[int64]string{}
	rows, err := f.pool.Query(ctx, `SELECT release_version, sources_digest FROM configpub.config_release WHERE env_tag = 'prod'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int64
		var d string
		if err := rows.Scan(&v, &d); err != nil {
			t.Fatal(err)
		}
		got[v] = d
	}
	if rows.Err() != nil || got[1] != "" || got[2] != sources {
		t.Fatalf("sources digests %v (%v); want none for release 1 (recorded before the column) and %s for release 2", got, rows.Err(), sources)
	}
	_, err = f.pool.Exec(ctx, `UPDATE configpub.config_release SET sources_digest = $1, row_revision = row_revision + 1
		WHERE env_tag = 'prod' AND release_version = 2`, "sha256:"+strings.Repeat("6", 64))
	if err == nil || !strings.Contains(err.Error(), "the sources digest is immutable") {
		t.Fatalf("changing a recorded sources digest: %v, want it refused", err)
	}

	// Release 3 changes the sources; release 4, compiled from release 3's
	// sources, renews host 0's snapshot: the only renewal. Release 2 has
	// release 1's digest, but release 1 was recorded without one.
	r3 := release("prod", 3, 2, 3, nil, nil)
	r3.SourcesDigest = "sha256:" + strings.Repeat("7", 64)
	f.promote(t, r3)
	r4 := release("prod", 4, 3, 3, func(i int) bool { return i == 0 }, func(int) int64 { return 3 })
	r4.SourcesDigest = r3.SourcesDigest
	f.promote(t, r4)
	wantRenewal := map[int64]bool{4: true}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Releases {
		if r.Renewal != wantRenewal[r.ReleaseVersion] {
			t.Errorf("status: release %d renewal %v, want %v", r.ReleaseVersion, r.Renewal, wantRenewal[r.ReleaseVersion])
		}
	}
	moves, err := f.store.History(ctx, "prod", promoter.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	renewalMoves := 0
	for _, m := range moves {
		if m.Renewal != wantRenewal[m.ReleaseVersion] {
			t.Errorf("history: move %d (release %d) renewal %v, want %v", m.MoveID, m.ReleaseVersion, m.Renewal, wantRenewal[m.ReleaseVersion])
		}
		if m.Renewal {
			renewalMoves++
		}
	}
	if renewalMoves != 1 {
		t.Errorf("history: %d moves by the renewal, want 1 (host 0's)", renewalMoves)
	}
	evs, err := f.store.ReleaseEvents(ctx, "prod", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Renewal != wantRenewal[e.ReleaseVersion] {
			t.Errorf("release journal: %s of release %d renewal %v, want %v", e.Kind, e.ReleaseVersion, e.Renewal, wantRenewal[e.ReleaseVersion])
		}
	}
}

// migrateToLatest applies every migration to db, created at an earlier
// version (pgtest.NewAt).
func migrateToLatest(t *testing.T, db *pgtest.DB) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := dbschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
}
