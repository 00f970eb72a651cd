package promoter_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/promoter"
)

// During a rolling upgrade a lease-renewal CronJob, a gate or an
// operator's rollback may still run a configpub built before the
// revocation lock, beside a revoke of the new one. The older binary's
// renewals and moves hold their environment's row from before they read
// the revocations until they commit, but not the revocation lock; these
// tests race a new revoke with such a command (promoter.AsAnOlderBinary)
// exactly as the tests of two new ones do.

// TestARevokeBesideAnOlderRenewalIsNotMissed: the revoke is asked for
// after the older renewal read which snapshots are revoked and signed the
// new leases, before it committed. The revoke waits for the renewal and
// lists the snapshot it leased as current; never a lease committed after
// the revocation with a revoke that saw none.
func TestARevokeBesideAnOlderRenewalIsNotMissed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	bad := r1.Targets[1].SnapshotID
	var r revokeAtStep
	older := f.open(t, func(o *promoter.Options) {
		promoter.AsAnOlderBinary(o)
		promoter.SetFaultInjector(o, r.inject(t, f, "renew:signed", promoter.RevokeInput{CommandID: id("revoke beside an older renewal"),
			SnapshotID: bad, Reason: "leaks a credential", Actor: "Carol <carol@example.com>"}))
	})
	res, err := older.RenewLeases(context.Background(), "prod")
	<-r.done
	revokedFirst, rev := r.first, r.rev
	if err != nil || r.err != nil {
		t.Fatalf("older renewal: %v; revoke: %v", err, r.err)
	}
	if revokedFirst {
		t.Fatalf("the revoke of %s committed while the older renewal, which had read the revocations, was in flight: "+
			"it renewed %d (skipped %v) after the revocation, and the revoke listed %v as current",
			bad, res.Renewed, res.Skipped, rev.Current)
	}
	want := r1.Targets[1].Host + "/" + r1.Targets[1].ServiceID + "/prod"
	if res.Renewed != 3 || !slices.Contains(rev.Current, want) {
		t.Fatalf("the renewal renewed %d (want 3) and the revoke listed %v as current (want %s)", res.Renewed, rev.Current, want)
	}
}

// TestARevokeBesideAnOlderRollbackIsNotMissed: the revoke is asked for
// after the older rollback checked the release's snapshots against the
// revocations, before it committed. The revoke waits for it and lists the
// pointer the rollback moved to the revoked snapshot.
func TestARevokeBesideAnOlderRollbackIsNotMissed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 4, nil, nil)
	f.promote(t, r1)
	f.promote(t, release("prod", 2, 1, 4, nil, nil))
	bad := r1.Targets[0].SnapshotID
	var r revokeAtStep
	older := f.open(t, func(o *promoter.Options) {
		promoter.AsAnOlderBinary(o)
		promoter.SetFaultInjector(o, r.inject(t, f, "activate:read", promoter.RevokeInput{CommandID: id("revoke beside an older rollback"),
			SnapshotID: bad, Reason: "leaks a credential", Actor: "Carol <carol@example.com>"}))
	})
	res, err := older.Rollback(context.Background(), promoter.RollbackInput{CommandID: id("older rollback"), EnvTag: "prod",
		ToRelease: 1, Actor: "Dave <dave@example.com>", Reason: "release 2 misbehaves"})
	<-r.done
	rev := r.rev
	if err != nil || r.err != nil {
		t.Fatalf("older rollback: %v; revoke: %v", err, r.err)
	}
	want := r1.Targets[0].Host + "/" + r1.Targets[0].ServiceID + "/prod"
	if f.pointers(t, "prod")[r1.Targets[0].Host+"/"+r1.Targets[0].ServiceID] != bad || res.Moved != 4 {
		t.Fatalf("the older rollback moved %d pointers, want 4 (one to %s)", res.Moved, bad)
	}
	if !slices.Contains(rev.Current, want) {
		t.Fatalf("the older rollback made revoked snapshot %s current, and the revoke listed %v (count %d) as current: "+
			"the operator who revoked it is not told the environment serves it", bad, rev.Current, rev.CurrentCount)
	}
	f.checkJournal(t)
}

// TestAMoveToARevokedReleaseSaysWhatToDo: a rollback or activation to a
// release holding a revoked snapshot is refused naming the snapshot and
// what the operator can do instead, also when it is refused in its
// activation (the snapshot revoked after the intent) and to a second run
// of that command, which returns the recorded refusal.
func TestAMoveToARevokedReleaseSaysWhatToDo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	f.promote(t, release("prod", 2, 1, 2, nil, nil))
	bad := r1.Targets[1].SnapshotID
	revoke := func() {
		if _, err := f.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke before the move"), SnapshotID: bad,
			Reason: "leaks a credential", Actor: "Carol <carol@example.com>"}); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	late := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step == "activate:begin" {
				once.Do(revoke) // after the intent: refused in the activation
			}
			return nil
		})
	})
	in := promoter.RollbackInput{CommandID: id("rollback to a revoked release"), EnvTag: "prod", ToRelease: 1,
		Actor: "Dave <dave@example.com>", Reason: "release 2 misbehaves"}
	_, inActivation := late.Rollback(ctx, in)
	_, again := f.store.Rollback(ctx, in) // the recorded refusal
	in.CommandID = id("another rollback to a revoked release")
	_, atIntent := f.store.Rollback(ctx, in)
	for name, err := range map[string]error{"refused in the activation": inActivation, "run again": again, "refused at the intent": atIntent} {
		if !errors.Is(err, promoter.ErrRevoked) || !strings.Contains(err.Error(), bad) ||
			!strings.Contains(err.Error(), "promote a new release") || !strings.Contains(err.Error(), "configpub status --env prod") {
			t.Errorf("%s: got %v, want ErrRevoked naming snapshot %s and what to do instead", name, err, bad)
		}
	}
}
