package promoter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/promoter"
)

// immutableChecksum digests every immutable table's content and the rows
// that existed of the append-only history tables up to the given marks.
func (f *fixture) immutableChecksum(t *testing.T) string {
	t.Helper()
	var sum string
	err := f.pool.QueryRow(context.Background(), `SELECT md5(concat_ws('|',
		(SELECT string_agg(a::text, ',' ORDER BY artifact_digest) FROM configpub.artifact a),
		(SELECT string_agg(s::text, ',' ORDER BY snapshot_id) FROM configpub.config_snapshot s),
		(SELECT string_agg(rt::text, ',' ORDER BY env_tag, release_version, host, service_id) FROM configpub.config_release_target rt),
		(SELECT string_agg(r::text, ',' ORDER BY revocation_id) FROM configpub.revocation r),
		(SELECT string_agg(concat_ws(':', env_tag, release_version, definition_hash, source_commit, actor, reason), ','
			ORDER BY env_tag, release_version) FROM configpub.config_release)))`).Scan(&sum)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func moveID(s string) string { return id("move", s) }

func TestRollbackAndForwardActivationOnlyMovePointers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 4, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 4, func(i int) bool { return i%2 == 0 }, func(int) int64 { return 1 })
	f.promote(t, r2)
	before := f.immutableChecksum(t)

	f.now = f.now.Add(minute)
	res, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb"), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "bad limits"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 2 || res.Unchanged != 2 || res.PreviousRelease != 2 || res.Action != promoter.ActionRollback {
		t.Fatalf("rollback got %+v, want 2 moved, 2 unchanged, from release 2", res)
	}
	f.wantPointersAt(t, r1)
	if got := f.immutableChecksum(t); got != before {
		t.Fatalf("rollback changed immutable tables: %s -> %s", before, got)
	}
	st, _ := f.store.Status(ctx, "prod")
	if st.CurrentRelease != 1 || st.Releases[1].State != promoter.StateRolledBack || st.Releases[0].State != promoter.StateActive {
		t.Fatalf("got %+v, want release 1 ACTIVE and 2 ROLLED_BACK", st.Releases)
	}

	f.now = f.now.Add(minute)
	res, err = f.store.Activate(ctx, promoter.MoveInput{CommandID: moveID("fwd"), EnvTag: "prod", Release: 2,
		Actor: "oncall", Reason: "fixed downstream"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 2 {
		t.Fatalf("forward got %+v, want 2 moved", res)
	}
	f.wantPointersAt(t, r2)
	if got := f.immutableChecksum(t); got != before {
		t.Fatalf("forward activation changed immutable tables: %s -> %s", before, got)
	}
	// Sequences keep increasing per identity across the moves: the move
	// time in microseconds, or one more than the previous within the same
	// microsecond (the two promotions share the clock's instant).
	wantSeqs := []int64{t0.UnixMicro(), t0.UnixMicro() + 1, t0.Add(minute).UnixMicro(), t0.Add(2 * minute).UnixMicro()}
	var seq int64
	if err := f.pool.QueryRow(ctx, "SELECT sequence FROM configpub.current_pointer WHERE host = 'host-00000'").Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if seq != wantSeqs[3] {
		t.Errorf("got sequence %d for a pointer moved 4 times, want %d", seq, wantSeqs[3])
	}
	hist, err := f.store.History(ctx, "prod", promoter.HistoryFilter{Host: "host-00000"})
	if err != nil {
		t.Fatal(err)
	}
	wantActions := []string{"promote", "promote", "rollback", "activate"}
	if len(hist) != len(wantActions) {
		t.Fatalf("got %d moves, want %d", len(hist), len(wantActions))
	}
	for i, m := range hist {
		if m.Action != wantActions[i] || m.Sequence != wantSeqs[i] {
			t.Errorf("move %d: got %s seq %d, want %s seq %d", i, m.Action, m.Sequence, wantActions[i], wantSeqs[i])
		}
	}
	if hist[2].Actor != "oncall" || hist[2].Reason != "bad limits" || hist[2].PreviousSnapshotID != r2.Targets[0].SnapshotID {
		t.Errorf("got rollback move %+v, want actor oncall, reason, previous snapshot %s", hist[2], r2.Targets[0].SnapshotID)
	}
	f.checkJournal(t)

	// Direction is checked.
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("x"), EnvTag: "prod", ToRelease: 2,
		Actor: "a", Reason: "r"}); !errors.Is(err, promoter.ErrConflict) {
		t.Errorf("rollback to the current release: got %v, want ErrConflict", err)
	}
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("y"), EnvTag: "prod", ToRelease: 7,
		Actor: "a", Reason: "r"}); !errors.Is(err, promoter.ErrNotFound) ||
		!strings.Contains(err.Error(), "release 7 does not exist in prod (the latest recorded release is 2)") {
		t.Errorf("rollback to a release that does not exist: got %v, want ErrNotFound naming it and the latest", err)
	}
}

func TestARevokedSnapshotIsNeverActivatedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 2, nil, nil)
	f.promote(t, r2)
	rev, err := f.store.Revoke(ctx, promoter.RevokeInput{CommandID: moveID("rev"), SnapshotID: r1.Targets[0].SnapshotID,
		Reason: "leaked limit", Actor: "sec"})
	if err != nil {
		t.Fatal(err)
	}
	if rev.RevocationID == 0 || len(rev.Current) != 0 {
		t.Fatalf("got %+v, want a revocation not affecting current pointers", rev)
	}
	journal := f.count(t, "SELECT count(*) FROM configpub.config_release_journal")
	_, err = f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb"), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "r"})
	if !errors.Is(err, promoter.ErrRevoked) {
		t.Fatalf("rollback onto a revoked snapshot: got %v, want ErrRevoked", err)
	}
	f.wantPointersAt(t, r2)
	if got := f.count(t, "SELECT count(*) FROM configpub.config_release_journal"); got != journal {
		t.Fatalf("refused rollback wrote %d journal rows, want 0", got-journal)
	}
	// status says so: release 1 can never be activated again, whatever
	// its activation window (it said "until" the window's end).
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Releases {
		if want := r.ReleaseVersion == 1; r.Revoked != want {
			t.Errorf("status of release %d: revoked %v, want %v", r.ReleaseVersion, r.Revoked, want)
		}
	}
	// A new release reusing the revoked snapshot is refused too.
	r3 := release("prod", 3, 2, 2, func(i int) bool { return i != 0 }, func(int) int64 { return 1 })
	if _, err := f.store.RecordAndActivate(ctx, r3); !errors.Is(err, promoter.ErrRevoked) {
		t.Fatalf("promoting a revoked snapshot: got %v, want ErrRevoked", err)
	}
	f.wantPointersAt(t, r2)
	// Revoking again with the same command replays.
	again, err := f.store.Revoke(ctx, promoter.RevokeInput{CommandID: moveID("rev"), SnapshotID: r1.Targets[0].SnapshotID,
		Reason: "leaked limit", Actor: "sec"})
	if err != nil || !again.Replayed || again.RevocationID != rev.RevocationID {
		t.Fatalf("got %+v %v, want a replay of revocation %d", again, err, rev.RevocationID)
	}
	f.checkJournal(t)
}

func TestAnotherIdentitysSnapshotCannotBeActivated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 2, func(i int) bool { return i == 0 }, func(int) int64 { return 1 })
	// Target 0 claims target 1's snapshot (same id, other identity).
	stolen := r1.Targets[1]
	stolen.Host, stolen.ServiceID = r2.Targets[0].Host, r2.Targets[0].ServiceID
	r2.Targets[0] = stolen
	_, err := f.store.RecordAndActivate(context.Background(), r2)
	if !errors.Is(err, promoter.ErrIdentityMismatch) {
		t.Fatalf("got %v, want ErrIdentityMismatch", err)
	}
	f.wantPointersAt(t, r1)
	if n := f.count(t, "SELECT count(*) FROM configpub.config_release WHERE release_version = 2"); n != 0 {
		t.Fatalf("got %d rows of the refused release, want 0", n)
	}
}

func TestRenewLeasesKeepsSequenceWithALaterIssuedAtAndNotifies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	listener, err := pgx.Connect(ctx, f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close(ctx)
	if _, err := listener.Exec(ctx, "LISTEN configpub_pointer"); err != nil {
		t.Fatal(err)
	}
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	n, err := waitNotification(ctx, listener)
	if err != nil {
		t.Fatalf("no notification after a pointer move: %v", err)
	}
	seq1 := t0.UnixMicro() // the first move's sequence: its time in microseconds
	wantBatch := func(what string, n pointerNote) {
		t.Helper()
		if r := n.Range; n.EnvTag != "prod" || r == nil || r.FromHost != "host-00000" || r.ToHost != "host-00001" || r.Count != 2 {
			t.Fatalf("%s: got notification %+v, want one batch of prod host-00000..host-00001", what, n)
		}
	}
	wantBatch("move", n)

	for round, wantIssued := range []string{"2026-11-29T12:04:00.000Z", "2026-11-29T12:04:00.001Z"} {
		if round == 0 {
			f.now = f.now.Add(4 * time.Minute)
		} // round 1: the same clock: issuedAt still moves forward
		res, err := f.store.RenewLeases(ctx, "prod")
		if err != nil {
			t.Fatal(err)
		}
		if res.Renewed != 2 {
			t.Fatalf("renewed %d, want 2", res.Renewed)
		}
		var body []byte
		var seq int64
		if err := f.pool.QueryRow(ctx, "SELECT manifest, sequence FROM configpub.current_pointer WHERE host = 'host-00000'").Scan(&body, &seq); err != nil {
			t.Fatal(err)
		}
		m, err := bundle.ParseDeliveryManifest(body)
		if err != nil {
			t.Fatal(err)
		}
		if m.Sequence != seq1 || seq != seq1 || m.IssuedAt != wantIssued || m.ActivatedAt != "2026-11-29T12:00:00.000Z" ||
			m.SnapshotID != r1.Targets[0].SnapshotID {
			t.Fatalf("round %d: got sequence %d issuedAt %s activatedAt %s, want sequence %d issuedAt %s activatedAt 12:00",
				round, m.Sequence, m.IssuedAt, m.ActivatedAt, seq1, wantIssued)
		}
		n, err := waitNotification(ctx, listener)
		if err != nil {
			t.Fatalf("round %d: no notification for the renewal: %v", round, err)
		}
		wantBatch(fmt.Sprintf("renewal %d", round), n)
	}
	if got := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind = 'renew'"); got != 4 {
		t.Fatalf("got %d renewal manifests, want 4", got)
	}
	// A revoked current snapshot is not renewed.
	if _, err := f.store.Revoke(ctx, promoter.RevokeInput{CommandID: moveID("rv"), PublicationID: r1.Targets[0].PublicationID,
		Reason: "bad", Actor: "sec"}); err != nil {
		t.Fatal(err)
	}
	res, err := f.store.RenewLeases(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if res.Renewed != 0 || len(res.Skipped) != 2 {
		t.Fatalf("got %+v, want both revoked pointers skipped", res)
	}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if st.Targets[0].State != promoter.TargetRevoked {
		t.Fatalf("got state %s, want REVOKED", st.Targets[0].State)
	}
}

// TestStatusReadsARuntimeThatFailedClosed: the last receipt decides what a
// runtime runs. One that names nothing running (a runtime that rejected its
// snapshot and failed closed) is RUNNING none and diverged; status kept
// saying RUNNING desired from the receipt before it.
func TestStatusReadsARuntimeThatFailedClosed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	f.writeReceipt(t, r1.Targets[0], bundle.PhaseCurrent, bundle.ResultApplied, "")
	f.writeReceipt(t, r1.Targets[1], bundle.PhaseCurrent, bundle.ResultApplied, "")
	f.writeReceipt(t, r1.Targets[1], bundle.PhaseCurrent, bundle.ResultRejected, "EXPIRED") // nothing running
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for i, tg := range st.Targets {
		failed := i == 1
		if tg.Running == nil || (tg.Running.SnapshotID == "") != failed || tg.Diverged != failed {
			t.Errorf("target %d: running %+v, diverged %v; want running nothing: %v", i, tg.Running, tg.Diverged, failed)
		}
	}
}
