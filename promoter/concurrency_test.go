package promoter_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/configpub/configpub/promoter"
)

func TestEightConcurrentActivationsOfOneReleaseActivateOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 20, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 20, nil, nil)
	const n = 8
	var wg sync.WaitGroup
	results := make([]*promoter.ActivationResult, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Each promote has its own Store, as separate processes would.
			s := f.open(t, nil)
			results[i], errs[i] = s.RecordAndActivate(context.Background(), r2)
		}(i)
	}
	wg.Wait()
	fresh := 0
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("promote %d: %v", i, errs[i])
		}
		if !results[i].Replayed {
			fresh++
		}
		if results[i].ReleaseVersion != 2 || results[i].Moved != 20 {
			t.Errorf("promote %d: got %+v, want release 2 with 20 moved", i, results[i])
		}
	}
	if fresh != 1 {
		t.Errorf("got %d fresh activations, want exactly 1 (the rest replay)", fresh)
	}
	if got := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); got != 20 {
		t.Errorf("got %d pointer_move rows for release 2, want 20 (one set)", got)
	}
	if got := f.count(t, "SELECT count(*) FROM configpub.config_release_journal WHERE release_version = 2 AND event_kind = 'promote'"); got != 1 {
		t.Errorf("got %d activation journal rows, want 1", got)
	}
	f.wantPointersAt(t, r2)
	f.checkJournal(t)
}

func TestTwoReleasesOnTheSameBaseOneWinsTheOtherWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.promote(t, release("prod", 1, 0, 10, nil, nil))
	a := release("prod", 2, 1, 10, nil, nil)
	b := release("prod", 2, 1, 10, nil, nil)
	b.CommandID = id("other commit")
	b.SourceCommit = "b"
	for i := range b.Targets { // different content: different snapshots and artifacts
		tg := &b.Targets[i]
		tg.Values = append([]byte("# commit b\n"), tg.Values...)
		tg.ArtifactDigest = digest(tg.Values)
		tg.SnapshotID, tg.PublicationID = id("b snap", i), id("b pub")
	}
	before := snapshotCount(t, f)
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() { defer wg.Done(); _, errA = f.open(t, nil).RecordAndActivate(context.Background(), a) }()
	go func() { defer wg.Done(); _, errB = f.open(t, nil).RecordAndActivate(context.Background(), b) }()
	wg.Wait()
	if (errA == nil) == (errB == nil) {
		t.Fatalf("got errA=%v errB=%v, want exactly one winner", errA, errB)
	}
	winner, loser, loserErr := a, b, errB
	if errA != nil {
		winner, loser, loserErr = b, a, errA
	}
	if !errors.Is(loserErr, promoter.ErrConflict) {
		t.Fatalf("loser got %v, want ErrConflict", loserErr)
	}
	f.wantPointersAt(t, winner)
	if got := f.count(t, "SELECT count(*) FROM configpub.command WHERE command_id = $1::text::uuid", loser.CommandID); got != 0 {
		t.Errorf("loser left %d command rows, want 0", got)
	}
	if got := f.count(t, "SELECT count(*) FROM configpub.config_snapshot WHERE snapshot_id = $1::text::uuid", loser.Targets[0].SnapshotID); got != 0 {
		t.Errorf("loser left %d snapshot rows, want 0", got)
	}
	if got, want := snapshotCount(t, f), before+10; got != want {
		t.Errorf("got %d snapshots, want %d (only the winner's)", got, want)
	}
	f.checkJournal(t)
}

func snapshotCount(t *testing.T, f *fixture) int {
	return f.count(t, "SELECT count(*) FROM configpub.config_snapshot")
}
