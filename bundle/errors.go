package bundle

import "errors"

// ErrDigestMismatch reports a recorded digest that does not match the
// content it covers.
var ErrDigestMismatch = errors.New("digest mismatch")

// ErrInvalidManifest: a release manifest breaks one of its own invariants
// (see Manifest.Validate).
var ErrInvalidManifest = errors.New("invalid release manifest")

// ErrReleaseNotRecorded: the release asked for is not recorded (in the
// store, or in the Git history searched).
var ErrReleaseNotRecorded = errors.New("release not recorded")

// ErrHistoryIncomplete: the Git history searched for a recorded release
// ends before that release is found because commits are missing from the
// repository (a shallow clone), so whether it is recorded cannot be told.
var ErrHistoryIncomplete = errors.New("history incomplete")
