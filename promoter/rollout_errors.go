package promoter

import (
	"errors"
	"fmt"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/textlist"
)

var (
	// ErrFrozen: the environment is inside a freeze window; promote and
	// activate are refused unless broken with a reason (*FreezeError).
	ErrFrozen = errors.New("environment frozen")
	// ErrNotReady: a two-phase activation timed out before every moving
	// target was READY for its candidate (*NotReadyError); nothing moved.
	ErrNotReady = errors.New("candidates not ready")
	// ErrCandidateRejected: a runtime rejected its candidate snapshot; the
	// release is FAILED and nothing moved (*RejectedError).
	ErrCandidateRejected = errors.New("candidate rejected")
	// ErrReleaseFailed: the release is FAILED and can no longer be
	// activated.
	ErrReleaseFailed = errors.New("release failed")
	// ErrNeverActive: a rollback was asked to a release that was never the
	// active release (STAGED or RECORDED): a rollback returns to what ran
	// before; activate moves to such a release, with an activation's
	// checks. Nothing moved.
	ErrNeverActive = errors.New("release was never active")
)

// NeverActive reports whether a release in lifecycle state is one that was
// never the active release of its environment: STAGED, RECORDED or FAILED
// (an activated release is ACTIVE, SUPERSEDED or ROLLED_BACK, and never
// leaves those).
func NeverActive(state string) bool {
	return state == StateStaged || state == StateRecorded || state == StateFailed
}

// FreezeError refuses a promotion or activation inside a freeze window. It
// matches ErrFrozen.
type FreezeError struct {
	EnvTag string
	Window bundle.FreezeWindow
	At     time.Time
	// ActiveRelease is set when the window is one of the active release's
	// policy (CheckFreezeInForce): it holds whatever the release being
	// activated says.
	ActiveRelease int64
	// Written, when not empty, says what was written before the window
	// was found open (a promotion's published artifacts, when the window
	// opened while they were published); the error says it instead of
	// "nothing written".
	Written string
}

func (e *FreezeError) Error() string {
	of := ""
	if e.ActiveRelease != 0 {
		of = fmt.Sprintf(" (the rollout policy of the active release %d: a release that changes or removes the window is held by it until it is active)", e.ActiveRelease)
	}
	written := "nothing written"
	if e.Written != "" {
		written = e.Written + "; nothing recorded, no pointer moved"
	}
	return fmt.Sprintf("environment %s is inside %s%s at %s; %s (to override: --break-glass --reason TEXT)",
		e.EnvTag, e.Window.Describe(), of, formatTime(e.At), written)
}

// Is makes errors.Is(err, ErrFrozen) true.
func (e *FreezeError) Is(target error) bool { return target == ErrFrozen }

// NotReadyError reports the identities that did not report READY for their
// candidate snapshot before a two-phase activation's timeout. It matches
// ErrNotReady; nothing moved.
type NotReadyError struct {
	EnvTag  string
	Release int64
	Timeout time.Duration
	Ready   int
	Missing []string // host/serviceId, sorted
	// NewerStaged, when not 0, is the newest release staged after Release:
	// the Config Server serves its candidates, so a prefetch makes the
	// runtimes answer about it, not about Release.
	NewerStaged int64
}

func (e *NotReadyError) Error() string {
	hint := "(a READY receipt is recorded by configpub readback --prefetch, which asks each runtime to fetch and verify its candidate)"
	if e.NewerStaged != 0 {
		hint = fmt.Sprintf("(release %d is staged after release %d: the Config Server serves release %d's candidates, so a prefetch "+
			"makes the runtimes answer about those; activate release %d, which is built on release %d)",
			e.NewerStaged, e.Release, e.NewerStaged, e.NewerStaged, e.Release)
	}
	return fmt.Sprintf("environment %s: release %d: %d of %d required targets not READY after %s: %s; nothing moved %s",
		e.EnvTag, e.Release, len(e.Missing), len(e.Missing)+e.Ready, e.Timeout, textlist.Join(e.Missing, len(e.Missing), 20), hint)
}

// Is makes errors.Is(err, ErrNotReady) true.
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }

// RejectedError reports a candidate a runtime rejected: the release was
// marked FAILED and nothing moved. It matches ErrCandidateRejected.
type RejectedError struct {
	EnvTag     string
	Release    int64
	Identity   string
	SnapshotID string
	Reason     string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("environment %s: release %d FAILED: %s rejected candidate snapshot %s (%s); nothing moved",
		e.EnvTag, e.Release, e.Identity, e.SnapshotID, e.Reason)
}

// Is makes errors.Is(err, ErrCandidateRejected) true.
func (e *RejectedError) Is(target error) bool { return target == ErrCandidateRejected }
