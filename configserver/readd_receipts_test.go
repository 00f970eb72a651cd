package configserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
)

// TestReAddedAtItsSnapshotIsUnconfirmedUntilReadBack: a runtime's target
// is read back APPLIED, then retired and brought back at the very snapshot
// it had, with no readback in between. Status must not call it APPLIED
// from the receipt read before the retirement — it is PUBLISHED (delivered,
// unconfirmed) — until readback reads the runtime after the re-add. Twice:
// a retirement of minutes, the runtime untouched (its status endpoint
// reads exactly as before the retirement, so the second read is the same
// receipt: it is recorded again, being the first since the move), and a
// rollback across the retirement held for three simulated days, the
// runtime failed closed and restarted. Promoter, Config Server, runtime
// client, readback and PostgreSQL are real; one simulated clock stamps
// moves and receipts.
func TestReAddedAtItsSnapshotIsUnconfirmedUntilReadBack(t *testing.T) {
	t.Parallel()
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	advValues, adv := readGoldenAdvisor(t)
	accValues, acc := readGolden(t, "com.networknt.agent-account-1.0.0")
	advT, accT := adv.promoterTarget(advValues), acc.promoterTarget(accValues)
	lease := promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute}
	advT.Lease, accT.Lease = lease, lease
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: clock.Now}})
	ps, key := e.openPromoter(t, clock.Now)
	g := &goldenRuntime{e: e, ps: ps, clock: clock, target: advT, aud: advT.Audience,
		id: bundle.Identity{Host: advT.Host, ServiceID: advT.ServiceID, EnvTag: advT.EnvTag}}
	var err error
	if g.trusted, err = signing.NewTrustedKey(&key.PublicKey); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release := func(v int64, ts ...promoter.Target) promoter.ReleaseInput {
		return promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: v,
			BaseReleaseVersion: v - 1, ManifestBytes: []byte("release manifest of the receipts test\n"),
			Actor: "ci", Reason: "r", Targets: ts}
	}
	state := func(when string) promoter.TargetStatus {
		t.Helper()
		st, err := ps.Status(ctx, "prod")
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range st.Targets {
			if tg.Host == advT.Host && tg.ServiceID == advT.ServiceID {
				return tg
			}
		}
		t.Fatalf("%s: no status of %s", when, g.id)
		return promoter.TargetStatus{}
	}

	if _, err := ps.RecordAndActivate(ctx, release(1, advT, accT)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, g.id, http.StatusOK, advT.SnapshotID)
	rt := g.client(t, e.srv.URL, t.TempDir())
	clock.Advance(time.Second)
	if ev, err := rt.Load(ctx); err != nil {
		t.Fatalf("release 1: %v (%+v)", err, ev)
	}
	col, _, target := g.readbackOf(t, rt)
	store := readback.NewStoreAt(e.db.PoolURL(t, e.db.URLFor(t, "configpub_promoter")), clock.Now)
	read := func(when string, want int) {
		t.Helper()
		clock.Advance(time.Second)
		res, err := readback.Run(ctx, col, store, []readback.Target{target})
		if err != nil || len(res) != 1 || res[0].Recorded != want {
			t.Fatalf("%s: readback got %+v, %v; want %d receipt(s) recorded", when, res, err, want)
		}
	}
	read("release 1", 1)
	if s := state("release 1"); s.State != promoter.TargetApplied {
		t.Fatalf("release 1 read back: state %s, want APPLIED", s.State)
	}

	// A retirement of minutes: release 2 drops it, a rollback to 1 brings
	// it back at the same snapshot; the runtime did not ask in between.
	clock.Advance(time.Minute)
	if _, err := ps.RecordAndActivate(ctx, release(2, accT)); err != nil {
		t.Fatal(err)
	}
	if s := state("retired"); s.State != promoter.TargetRetired {
		t.Fatalf("retired: state %s, want RETIRED", s.State)
	}
	clock.Advance(time.Minute)
	if _, err := ps.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "back"}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, g.id, http.StatusOK, advT.SnapshotID)
	s := state("rolled back to 1")
	if s.State != promoter.TargetPublished || s.SnapshotID != advT.SnapshotID || s.AcknowledgedAt != nil {
		t.Fatalf("rolled back across the retirement, no readback since: state %s (snapshot %s, acknowledged %v), want PUBLISHED, unacknowledged",
			s.State, s.SnapshotID, s.AcknowledgedAt)
	}
	if s.Running == nil || s.Running.SnapshotID != advT.SnapshotID || !s.Running.ReportedAt.Before(s.MovedAt) {
		t.Fatalf("rolled back: running %+v, want the pre-retirement receipt's snapshot, read before the move at %s", s.Running, s.MovedAt)
	}
	// The runtime still runs the snapshot it loaded before the retirement:
	// the same receipt as then, and the first since the move.
	read("rolled back to 1", 1)
	if s := state("rolled back, read back"); s.State != promoter.TargetApplied || s.AcknowledgedAt == nil {
		t.Fatalf("rolled back, read back after the move: state %s acknowledged %v, want APPLIED", s.State, s.AcknowledgedAt)
	}
	read("rolled back, read again", 0)

	// A rollback across a retirement held three days: activating 2 retires
	// it, the runtime fails closed at its lease's end; rolling back to 1
	// brings it back at the same snapshot.
	clock.Advance(time.Hour)
	if _, err := ps.Activate(ctx, promoter.MoveInput{CommandID: uuid.NewString(), EnvTag: "prod", Release: 2,
		Actor: "oncall", Reason: "forward"}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, g.id, http.StatusGone, "")
	clock.Advance(3 * 24 * time.Hour)
	if _, err := ps.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "back again"}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, g.id, http.StatusOK, advT.SnapshotID)
	if s := state("three days retired"); s.State != promoter.TargetPublished || s.AcknowledgedAt != nil {
		t.Fatalf("back after three days, no readback since: state %s acknowledged %v, want PUBLISHED", s.State, s.AcknowledgedAt)
	}
	clock.Advance(time.Second)
	if ev, err := g.client(t, e.srv.URL, t.TempDir()).Load(ctx); err != nil {
		t.Fatalf("a runtime restarted after three days: %v (%+v)", err, ev)
	}
	if ev, err := rt.Load(ctx); err != nil {
		t.Fatalf("the runtime after three days: %v (%+v)", err, ev)
	}
	read("three days retired", 1)
	if s := state("three days retired, read back"); s.State != promoter.TargetApplied || s.AcknowledgedAt == nil {
		t.Fatalf("back after three days, read back: state %s acknowledged %v, want APPLIED", s.State, s.AcknowledgedAt)
	}
}
