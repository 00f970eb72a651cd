package pgstore

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/syncbuf"
)

// A Config Server reading a hot standby that stops replaying (replay
// paused) or stops receiving (its replication connection cut) answers
// ErrUnavailable and is not ready once the standby lags by more than
// MaxReplicaLag, instead of serving the primary's pointers of however long
// ago — which a server without the limit does —, and serves again once the
// standby catches up. Both faults are caused for real on a streaming
// replica; the test does not run in parallel (the replica is shared).
func TestStandbyThatFallsBehindIsNotServed(t *testing.T) {
	db, owner, sd := newSeed(t)
	id := testIdentity(1)
	cur := sd.snapshot(t, owner, id, 1)
	sd.move(t, owner, cur, "")
	const maxLag = time.Second
	url := db.ReplicaURLFor(t, "configpub_server")
	st := runStore(t, url, Options{MaxReplicaLag: maxLag})
	unlimited := runStore(t, url, Options{MaxReplicaLag: -1})
	waitServed(t, st, id, cur.snapshotID, 2*time.Second)

	// Replay paused: the standby receives the move and does not apply it.
	resume := db.PauseReplay(t)
	next := sd.snapshot(t, owner, id, 2)
	sd.move(t, owner, next, "")
	moved := time.Now()
	err := waitUnavailable(t, st, id, 10*time.Second)
	if d := time.Since(moved); d < maxLag {
		t.Errorf("unavailable %s after the move, before the standby lagged by %s", d, maxLag)
	}
	if !strings.Contains(err.Error(), "WAL received and not replayed") {
		t.Errorf("paused replay: %v; want it to say WAL was received and not replayed", err)
	}
	if err := st.Ready(context.Background()); !errors.Is(err, configserver.ErrUnavailable) {
		t.Errorf("Ready with replay paused = %v, want ErrUnavailable", err)
	}
	if lag := st.Stats().ReplicaLag; lag <= maxLag {
		t.Errorf("Stats().ReplicaLag = %s with replay paused, want more than %s", lag, maxLag)
	}
	// What the limit prevents: the same standby, read without one, serves
	// the pointer the primary moved away from.
	if got, err := servedSnapshot(unlimited, id); err != nil || got != cur.snapshotID {
		t.Errorf("without a limit: serves %q (%v), want the stale %s", got, err, cur.snapshotID)
	}
	resume()
	waitServed(t, st, id, next.snapshotID, 5*time.Second)
	if err := st.Ready(context.Background()); err != nil {
		t.Errorf("Ready after replay resumed: %v", err)
	}

	// Replication cut: the standby has no WAL receiver and hears of no move.
	restore := db.CutReplication(t)
	err = waitUnavailable(t, st, id, 15*time.Second)
	if !strings.Contains(err.Error(), "no WAL receiver") {
		t.Errorf("replication cut: %v; want it to say the standby has no WAL receiver", err)
	}
	third := sd.snapshot(t, owner, id, 3)
	sd.move(t, owner, third, "")
	if got, err := servedSnapshot(unlimited, id); err != nil || got != next.snapshotID {
		t.Errorf("without a limit, replication cut: serves %q (%v), want the stale %s", got, err, next.snapshotID)
	}
	restore()
	// The standby retries its primary every wal_retrieve_retry_interval (5 s).
	waitServed(t, st, id, third.snapshotID, 30*time.Second)
	if lag := st.Stats().ReplicaLag; lag > maxLag {
		t.Errorf("Stats().ReplicaLag = %s after the standby caught up", lag)
	}
}

// A standby where the lag cannot be measured (a function the measurement
// calls is not executable, as on some managed services' replicas) is still
// served — without the limit, and saying so — rather than never: the
// fault is real, the function's EXECUTE revoked in the test database on the
// primary and replayed.
func TestStandbyLagUnmeasurableStillServes(t *testing.T) {
	db, owner, sd := newSeed(t)
	id := testIdentity(1)
	cur := sd.snapshot(t, owner, id, 1)
	sd.move(t, owner, cur, "")
	ctx := context.Background()
	const fn = "pg_catalog.pg_last_wal_receive_lsn()"
	if _, err := owner.Exec(ctx, "REVOKE EXECUTE ON FUNCTION "+fn+" FROM PUBLIC"); err != nil {
		t.Skipf("cannot revoke %s here: %v", fn, err)
	}
	t.Cleanup(func() { _, _ = owner.Exec(context.Background(), "GRANT EXECUTE ON FUNCTION "+fn+" TO PUBLIC") })
	var logs syncbuf.Buffer
	st := runStore(t, db.ReplicaURLFor(t, "configpub_server"), Options{MaxReplicaLag: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitServed(t, st, id, cur.snapshotID, 2*time.Second)
	if !strings.Contains(logs.String(), "cannot measure how far the hot standby lags its primary") {
		t.Errorf("no warning that the lag is not measured:\n%s", logs.String())
	}
	next := sd.snapshot(t, owner, id, 2)
	sd.move(t, owner, next, "")
	waitServed(t, st, id, next.snapshotID, 5*time.Second)
}

// waitUnavailable waits until st answers ErrUnavailable for id and returns
// that error.
func waitUnavailable(t testing.TB, st *Store, id bundle.Identity, within time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := servedSnapshot(st, id)
		if errors.Is(err, configserver.ErrUnavailable) {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still serves %q (%v) after %s, want ErrUnavailable", id, got, err, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lagTracker judges a standby from readings alone: WAL waiting to be
// replayed counts from when it was first seen received, a standby that
// streams counts from when it lost its receiver, one fed by log shipping
// only never does, and a promoted one is not behind anything.
func TestLagTracker(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	lsn := func(n int64) *int64 { return &n }
	streaming := func(received, replayed int64) replication {
		return replication{inRecovery: true, received: lsn(received), replayed: lsn(replayed), receiver: true}
	}
	type step struct {
		at     int
		r      replication
		lag    time.Duration
		reason string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"caught up", []step{
			{0, streaming(100, 100), 0, ""},
			{3600, streaming(100, 100), 0, ""}, // an idle primary is not a lag
		}},
		{"replay behind, then catching up in two moves", []step{
			{0, streaming(100, 100), 0, ""},
			{10, streaming(200, 100), 0, "WAL received and not replayed"},
			{20, streaming(300, 150), 10 * time.Second, "WAL received and not replayed"},
			{30, streaming(300, 200), 10 * time.Second, "WAL received and not replayed"}, // 200 replayed: 300 arrived at 20
			{40, streaming(300, 300), 0, ""},
		}},
		{"receiver lost", []step{
			{0, streaming(100, 100), 0, ""},
			{5, replication{inRecovery: true, received: lsn(100), replayed: lsn(100)}, 0, "no WAL receiver"},
			{65, replication{inRecovery: true, received: lsn(100), replayed: lsn(100)}, time.Minute, "no WAL receiver"},
			{66, streaming(100, 100), 0, ""},
		}},
		{"log shipping only", []step{
			{0, replication{inRecovery: true, replayed: lsn(100)}, 0, ""},
			{86400, replication{inRecovery: true, replayed: lsn(500)}, 0, ""},
		}},
		{"promoted", []step{
			{0, streaming(200, 100), 0, "WAL received and not replayed"},
			{100, replication{received: lsn(200), replayed: lsn(100)}, 0, ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr lagTracker
			for _, s := range tc.steps {
				l := tr.observe(at(s.at), s.r)
				if l.d != s.lag || (s.lag > 0 && !strings.HasPrefix(l.reason, s.reason)) {
					t.Errorf("at %ds: lag %s (%q), want %s (%q)", s.at, l.d, l.reason, s.lag, s.reason)
				}
			}
		})
	}

	// A standby that keeps receiving and never replays: the samples stay
	// bounded and the lag still counts from the first.
	var tr lagTracker
	for i := range 10 * maxLagSamples {
		l := tr.observe(at(i), streaming(int64(200+i), 100))
		if l.d != time.Duration(i)*time.Second {
			t.Fatalf("round %d: lag %s, want %ds", i, l.d, i)
		}
	}
	if len(tr.samples) > maxLagSamples {
		t.Errorf("%d samples kept, want at most %d", len(tr.samples), maxLagSamples)
	}
}
