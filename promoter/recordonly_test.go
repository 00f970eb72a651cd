package promoter_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/configpub/configpub/promoter"
)

// TestRecordMovesNothingAndIsTheHead: a release recorded without
// activation (how promote records a release it catches up) writes the
// release, its snapshots and targets and nothing a runtime is served — no
// pointer move, no candidate pointer, no delivery manifest — and stays
// RECORDED/NOT_REQUESTED; it is the head the next release is built on, so
// release 3 on base 2 records while release 1 is still active, and
// activating release 3 moves each pointer once, from release 1. Recording
// again replays; a release on another base is a conflict with nothing
// written; `activate` may still move to the recorded release later, a
// rollback may not (it never ran).
func TestRecordMovesNothingAndIsTheHead(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	manifests := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest")

	r2 := release("prod", 2, 1, 3, func(i int) bool { return i != 1 }, func(int) int64 { return 1 })
	r2.CommandID = id("record", 2)
	rec, err := f.store.Record(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Targets != 3 || rec.ActiveRelease != 1 || rec.BaseRelease != 1 || rec.Replayed {
		t.Fatalf("record result %+v, want 3 targets on base 1 with release 1 active", rec)
	}
	f.wantPointersAt(t, r1)
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateRecorded || o != promoter.OutcomeNotRequested {
		t.Fatalf("release 2 is %s/%s, want RECORDED/NOT_REQUESTED", s, o)
	}
	for _, c := range []struct {
		what, sql string
		args      []any
	}{
		{"pointer moves", "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2", nil},
		{"candidate pointers", "SELECT count(*) FROM configpub.candidate_pointer", nil},
		{"delivery manifests", "SELECT count(*) - $1 FROM configpub.delivery_manifest", []any{manifests}},
		{"targets beyond release 2's three", "SELECT count(*) - 3 FROM configpub.config_release_target WHERE release_version = 2", nil},
		{"missing release rows", "SELECT 1 - count(*) FROM configpub.config_release WHERE release_version = 2 AND target_count = 3", nil},
	} {
		if n := f.count(t, c.sql, c.args...); n != 0 {
			t.Fatalf("recording release 2 wrote %d %s", n, c.what)
		}
	}
	again, err := f.store.Record(ctx, r2)
	if err != nil || !again.Replayed || again.Targets != 3 {
		t.Fatalf("record again: %+v, %v; want a replay", again, err)
	}
	if _, err := f.store.Record(ctx, release("prod", 3, 1, 3, nil, nil)); !errors.Is(err, promoter.ErrConflict) {
		t.Fatalf("recording on a base below the recorded head: %v, want a conflict", err)
	}

	r3 := release("prod", 3, 2, 3, func(i int) bool { return i == 0 }, func(i int) int64 {
		if i == 1 {
			return 1
		}
		return 2
	})
	res := f.promote(t, r3)
	if res.PreviousRelease != 1 {
		t.Fatalf("release 3 activated over release %d, want 1 (release 2 was never active)", res.PreviousRelease)
	}
	f.wantPointersAt(t, r3)
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 3 AND previous_release_version <> 1"); n != 0 {
		t.Fatalf("%d pointers moved to release 3 from another release than 1", n)
	}
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateRecorded || o != promoter.OutcomeNotRequested {
		t.Fatalf("release 2 is %s/%s after release 3's activation, want RECORDED/NOT_REQUESTED", s, o)
	}
	if s, _ := f.releaseState(t, "prod", 1); s != promoter.StateSuperseded {
		t.Fatalf("release 1 is %s, want SUPERSEDED", s)
	}

	// Release 2 never ran: a rollback does not return to it; activate
	// moves to it.
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("back", 2), EnvTag: "prod", ToRelease: 2, Actor: "a",
		Reason: "to the recorded release"}); !errors.Is(err, promoter.ErrNeverActive) || !strings.Contains(err.Error(), "is RECORDED") {
		t.Fatalf("roll back to the recorded release 2: %v, want ErrNeverActive naming RECORDED", err)
	}
	f.wantPointersAt(t, r3)
	back, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: id("activate", 2), EnvTag: "prod", Release: 2, Actor: "a", Reason: "to the recorded release"})
	if err != nil {
		t.Fatalf("activate the recorded release 2: %v", err)
	}
	if back.PreviousRelease != 3 {
		t.Fatalf("activation %+v, want from release 3", back)
	}
	f.wantPointersAt(t, r2)
	f.checkJournal(t)
}
