package promoter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/pointernote"
	"github.com/configpub/configpub/promoter"
)

// collectNotes reads notifications until none arrives for quiet.
func collectNotes(t *testing.T, conn *pgx.Conn, quiet time.Duration) []pointernote.Note {
	t.Helper()
	var notes []pointernote.Note
	for {
		raw, err := rawNotification(conn, quiet)
		if err != nil {
			return notes
		}
		var n pointernote.Note
		if err := json.Unmarshal([]byte(raw), &n); err != nil {
			t.Fatalf("payload %s: %v", raw, err)
		}
		notes = append(notes, n)
	}
}

// TestActivationMovesInBatchesWithOneNotificationPerBatch activates ten
// targets three at a time: a real LISTEN connection receives one batch
// notification per three moved pointers (4), then, for a release that
// drops three identities and changes the rest, 3 for its seven moves and
// one for the three retirements; the ranges' counts add up to what moved.
func TestActivationMovesInBatchesWithOneNotificationPerBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *promoter.Options) { o.MoveBatch = 3 })
	listener := listen(t, f)
	r1 := release("prod", 1, 0, 10, nil, nil)
	if res := f.promote(t, r1); res.Moved != 10 {
		t.Fatalf("moved %d, want 10", res.Moved)
	}
	f.wantPointersAt(t, r1)
	notes := collectNotes(t, listener, 500*time.Millisecond)
	if len(notes) != 4 {
		t.Fatalf("got %d notifications %+v, want 4 (one per batch of 3)", len(notes), notes)
	}
	sum := 0
	for _, n := range notes {
		if n.Range == nil || n.EnvTag != "prod" || n.Range.Count > 3 {
			t.Fatalf("got %+v, want a batch of at most 3 prod identities", n)
		}
		sum += n.Range.Count
	}
	if sum != 10 || notes[0].Range.FromHost != "host-00000" || notes[3].Range.ToHost != "host-00009" {
		t.Fatalf("ranges %+v cover %d identities, want host-00000..host-00009 (10)", notes, sum)
	}

	r2 := release("prod", 2, 1, 7, nil, nil)
	res := f.promote(t, r2)
	if res.Moved != 7 || res.Retired != 3 {
		t.Fatalf("got %+v, want 7 moved and 3 retired", res)
	}
	f.wantMapping(t, r2, "host-00007/svc", "host-00008/svc", "host-00009/svc")
	notes = collectNotes(t, listener, 500*time.Millisecond)
	if len(notes) != 4 {
		t.Fatalf("got %d notifications %+v, want 4 (3 batches of moves, 1 of retirements)", len(notes), notes)
	}
	retiredNote := notes[3].Range
	if retiredNote == nil || retiredNote.FromHost != "host-00007" || retiredNote.ToHost != "host-00009" || retiredNote.Count != 3 {
		t.Fatalf("got %+v, want the retirements host-00007..host-00009 as the last batch", notes[3])
	}
	f.checkJournal(t)
}

// TestAFaultInALaterBatchMovesNoPointer fails the activation while it
// writes its third batch of two: nothing of the earlier batches stays (one
// transaction), no notification is delivered, and the re-run moves all
// seven pointers.
func TestAFaultInALaterBatchMovesNoPointer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *promoter.Options) { o.MoveBatch = 2 })
	r1 := release("prod", 1, 0, 7, nil, nil)
	f.promote(t, r1)
	listener := listen(t, f)
	writes := 0
	faulty := f.open(t, func(o *promoter.Options) {
		o.MoveBatch = 2
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step == "activate:pointer_move" {
				if writes++; writes == 3 {
					return errFault
				}
			}
			return nil
		})
	})
	r2 := release("prod", 2, 1, 7, nil, nil)
	if _, err := faulty.RecordAndActivate(context.Background(), r2); !errors.Is(err, errFault) {
		t.Fatalf("got %v, want the injected fault", err)
	}
	if writes != 3 {
		t.Fatalf("the fault hit batch %d, want 3", writes)
	}
	f.wantPointersAt(t, r1)
	for table, want := range map[string]int{"pointer_move": 0, "delivery_manifest": 0} {
		n := f.count(t, "SELECT count(*) FROM configpub."+table+" d JOIN configpub.config_snapshot s ON s.snapshot_id = d."+
			map[string]string{"pointer_move": "next_snapshot_id", "delivery_manifest": "snapshot_id"}[table]+" WHERE s.release_version = 2")
		if n != want {
			t.Fatalf("got %d %s rows of release 2, want %d", n, table, want)
		}
	}
	if notes := collectNotes(t, listener, 300*time.Millisecond); len(notes) != 0 {
		t.Fatalf("got notifications %+v from a rolled-back activation, want none", notes)
	}
	res := f.promote(t, r2)
	if res.Moved != 7 {
		t.Fatalf("re-run got %+v, want 7 moved", res)
	}
	f.wantPointersAt(t, r2)
	if notes := collectNotes(t, listener, 500*time.Millisecond); len(notes) != 4 {
		t.Fatalf("got %d notifications, want 4 (one per batch of 2)", len(notes))
	}
	f.checkJournal(t)
}

// TestRenewalsAndReSigningGoInBatches renews and then re-signs (a raised
// epoch) an environment three pointers at a time: of ten identities, two
// retired and one revoked, the seven others are renewed (same sequence) and
// re-signed (higher sequences) exactly once each, the revoked one is
// skipped and keeps its manifest, and each batch sends one notification.
func TestRenewalsAndReSigningGoInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, func(o *promoter.Options) { o.MoveBatch = 3 })
	f.promote(t, release("prod", 1, 0, 10, nil, nil))
	f.now = f.now.Add(time.Minute)
	r2 := release("prod", 2, 1, 8, nil, nil)
	f.promote(t, r2)
	if _, err := f.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("batch revoke"), SnapshotID: r2.Targets[4].SnapshotID,
		Reason: "leaked", Actor: "sec"}); err != nil {
		t.Fatal(err)
	}
	listener := listen(t, f)
	before := f.pointerRows(t, "prod")
	wantBatches := func(what string, n int) {
		t.Helper()
		notes := collectNotes(t, listener, 500*time.Millisecond)
		sum := 0
		for _, n := range notes {
			if n.Range == nil || n.Range.Count > 3 {
				t.Fatalf("%s: got %+v, want batches of at most 3", what, n)
			}
			sum += n.Range.Count
		}
		if len(notes) != 3 || sum != n {
			t.Fatalf("%s: got %d notifications covering %d identities %+v, want 3 covering %d", what, len(notes), sum, notes, n)
		}
	}
	check := func(what string, seqUp bool) {
		t.Helper()
		after := f.pointerRows(t, "prod")
		for k, b := range before {
			a := after[k]
			switch {
			case b.Retired || k == "host-00004/svc":
				if !bytes.Equal(a.Manifest, b.Manifest) {
					t.Errorf("%s: %s (retired or revoked) was re-signed", what, k)
				}
			case bytes.Equal(a.Manifest, b.Manifest) || a.Snapshot != b.Snapshot || (a.Sequence > b.Sequence) != seqUp:
				t.Errorf("%s: %s: sequence %d -> %d, re-signed %v, want re-signed with a %s sequence", what, k, b.Sequence, a.Sequence,
					!bytes.Equal(a.Manifest, b.Manifest), map[bool]string{true: "higher", false: "same"}[seqUp])
			}
		}
		before = after
	}
	f.now = f.now.Add(time.Minute)
	res, err := f.store.RenewLeases(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if res.Renewed != 7 || len(res.Skipped) != 1 || res.Skipped[0] != "host-00004/svc/prod" {
		t.Fatalf("renewed %d, skipped %v; want 7 renewed and host-00004/svc/prod skipped", res.Renewed, res.Skipped)
	}
	wantBatches("renewal", 7)
	check("renewal", false)
	f.now = f.now.Add(time.Minute)
	ep, err := f.store.RaiseEpoch(ctx, promoter.EpochInput{CommandID: id("batch epoch"), EnvTag: "prod", Epoch: 2, Actor: "sec", Reason: "leak"})
	if err != nil {
		t.Fatal(err)
	}
	if ep.Resigned != 7 || len(ep.Skipped) != 1 {
		t.Fatalf("re-signed %d, skipped %v; want 7 and one", ep.Resigned, ep.Skipped)
	}
	wantBatches("re-signing", 7)
	check("re-signing", true)
	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind IN ('renew', 'resign')"); n != 14 {
		t.Errorf("%d renewal and re-signing manifests, want 14", n)
	}
}
