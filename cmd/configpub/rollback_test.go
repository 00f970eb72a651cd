package main

import (
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
)

// TestReturnLine: the line a move prints about the release it replaced —
// until when and how to move back, that its window ended, or nothing.
func TestReturnLine(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	until := at.Add(48 * time.Hour)
	ended := at.Add(-time.Second)
	for _, c := range []struct {
		name string
		res  promoter.ActivationResult
		want string
	}{
		{"promotion", promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 3, PreviousRelease: 2, ActivatedAt: at, PreviousActivatableUntil: &until},
			"release 2 can be returned to until 2026-12-06T12:00:00Z: configpub rollback --env prod --release 2 --reason TEXT --actor NAME --key cosign.key"},
		{"rollback", promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 1, PreviousRelease: 3, ActivatedAt: at, PreviousActivatableUntil: &until},
			"release 3 can be returned to until 2026-12-06T12:00:00Z: configpub activate --env prod --release 3 --reason TEXT --actor NAME --key cosign.key"},
		{"ended", promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 3, PreviousRelease: 2, ActivatedAt: at, PreviousActivatableUntil: &ended},
			"release 2 can no longer be returned to: its activation window ended 2026-12-04T11:59:59Z (a move back is refused when a target would move to a snapshot whose window ended; revert and promote instead)"},
		{"ends at the move", promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 3, PreviousRelease: 2, ActivatedAt: at, PreviousActivatableUntil: &at},
			"release 2 can no longer be returned to: its activation window ended 2026-12-04T12:00:00Z (a move back is refused when a target would move to a snapshot whose window ended; revert and promote instead)"},
		{"first release", promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 1, ActivatedAt: at}, ""},
		{"window unknown", promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 3, PreviousRelease: 2, ActivatedAt: at}, ""},
		{"replay", promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 3, PreviousRelease: 2, ActivatedAt: at, PreviousActivatableUntil: &until, Replayed: true}, ""},
	} {
		if got := returnLine(&c.res); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestNotReactivatedSaysHowBack: a promotion of a recorded release that is
// not active moves nothing and says how to return to it — activate for a
// release newer than the active one (rolled back), rollback for an older
// one, which is also what a commit reverting a change holds: that wants the
// next release instead. An older release that never ran (RECORDED by a
// promote that caught it up) is activated: rollback refuses it.
func TestNotReactivatedSaysHowBack(t *testing.T) {
	for _, c := range []struct {
		name, state     string
		release, active int64
		want, not       string
	}{
		{"rolled back", promoter.StateRolledBack, 3, 2, "(to return to it: configpub activate --env prod --release 3 --reason TEXT --actor NAME --key cosign.key)", "rollback"},
		{"reverted", promoter.StateSuperseded, 1, 2, "(to return to it: configpub rollback --env prod --release 1 --reason TEXT --actor NAME --key cosign.key; to make this commit's sources a new release (a revert), configpub compile builds the next release", "activate"},
		{"caught up, never active", promoter.StateRecorded, 2, 3, "(to return to it: configpub activate --env prod --release 2 --reason TEXT --actor NAME --key cosign.key)", "rollback"},
	} {
		var b strings.Builder
		res := &promote.Result{Review: &review.Review{Commit: "0123456789ab"}, EnvTag: "prod", ReleaseVersion: c.release, BaseRelease: c.release - 1}
		if err := printNotReactivated(&b, res, c.state, c.active, "recorded earlier from abc"); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); !strings.Contains(got, c.want) || strings.Contains(got, "configpub "+c.not) || !strings.Contains(got, "nothing moved") {
			t.Errorf("%s: %q, want %q and no %q", c.name, got, c.want, c.not)
		}
	}
}

// TestPromoteResultSaysWhatWasCaughtUp: a promotion that first recorded a
// release the store had not recorded says so, with that recording's own
// line (recorded, not activated), before its own.
func TestPromoteResultSaysWhatWasCaughtUp(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	first := &promote.Result{Review: &review.Review{Commit: "2222222222222222222222222222222222222222"}, EnvTag: "prod", ReleaseVersion: 2, BaseRelease: 1,
		CommandID: "c2", Recorded: &promoter.RecordResult{EnvTag: "prod", ReleaseVersion: 2, BaseRelease: 1, ActiveRelease: 1, Targets: 4, RecordedAt: at}}
	res := &promote.Result{Review: &review.Review{Commit: "3333333333333333333333333333333333333333"}, EnvTag: "prod", ReleaseVersion: 3, BaseRelease: 2,
		CommandID: "c3", Activation: &promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 3, PreviousRelease: 1, ActivatedAt: at, Moved: 1},
		CaughtUp: []promote.CaughtUp{{ReleaseVersion: 2, Commit: first.Review.Commit, Result: first}}}
	var b strings.Builder
	if err := printPromoteResult(&b, res); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	i := strings.Index(got, "caught up first: release 2 from 2222222222222222222222222222222222222222, which release 3 is built on")
	j := strings.Index(got, "prod release 2 (base 1) from 2222222222222222222222222222222222222222: recorded, not activated: no pointer moved (4 targets")
	k := strings.Index(got, "prod release 3 (base 2) from 3333")
	if i < 0 || j < i || k < j {
		t.Fatalf("got:\n%s\nwant the caught-up line, release 2's line, then release 3's", got)
	}
}

// TestStagedReplaySaysWhatHappenedSince: promoting again a commit whose
// release was staged, then activated and rolled back (by the health gate,
// say), says so and moves nothing — never "already staged, activate with"
// for a release that was rejected; one activated since says it is active.
func TestStagedReplaySaysWhatHappenedSince(t *testing.T) {
	for _, c := range []struct {
		name, state string
		active      int64
		want, not   string
	}{
		{"rolled back", promoter.StateRolledBack, 4, "staged earlier by this command (replayed) and since rolled back; release 4 is active; nothing moved", "already staged"},
		{"activated", promoter.StateActive, 5, "staged earlier by this command (replayed) and since activated: it is the active release; nothing moved", "activate with"},
		{"still staged", promoter.StateStaged, 4, "already staged (replayed); no pointer moved", "since"},
	} {
		var b strings.Builder
		res := &promote.Result{Review: &review.Review{Commit: "0123456789ab"}, EnvTag: "prod", ReleaseVersion: 5, BaseRelease: 4,
			Staged: &promoter.StageResult{EnvTag: "prod", ReleaseVersion: 5, Replayed: true, StateNow: c.state, ActiveNow: c.active}}
		if err := printPromoteResult(&b, res); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); !strings.Contains(got, c.want) || strings.Contains(got, c.not) {
			t.Errorf("%s: %q, want %q and no %q", c.name, got, c.want, c.not)
		}
	}
}

// TestPromoteResultSaysRotationFromReplaced: a promotion that signed again
// artifacts published before names the key rotation it followed (the
// recorded keys that had signed them) and says apart those whose
// signatures were by a key the store never signed with.
func TestPromoteResultSaysRotationFromReplaced(t *testing.T) {
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	const old = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	res := &promote.Result{Review: &review.Review{Commit: "3333333333333333333333333333333333333333"}, EnvTag: "prod", ReleaseVersion: 3, BaseRelease: 2,
		CommandID: "c3", Activation: &promoter.ActivationResult{EnvTag: "prod", ReleaseVersion: 3, PreviousRelease: 2, ActivatedAt: at, Moved: 1},
		Resigned: 4, RotatedFrom: []string{old}, Replaced: 2}
	var b strings.Builder
	if err := printPromoteResult(&b, res); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"signed 4 artifacts published before under another key " + old + " (which this store signed with before) with this key too (after a key rotation",
		"signed 2 artifacts published before whose signatures are by a key this store never signed with: their signatures were replaced in the registry — not a key rotation",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("got:\n%s\nwant a line with %q", got, want)
		}
	}
}
