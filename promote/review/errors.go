package review

import (
	"errors"
	"fmt"
)

// Sentinel errors. A *RefusalError wraps ErrNotReviewed and exactly one of the
// specific reasons, so errors.Is works for both.
var (
	// ErrNotReviewed is the class of every refusal: the commit must not be promoted.
	ErrNotReviewed = errors.New("commit not reviewed")
	// ErrNotOnProtectedRef: the commit is not on the first-parent history of the protected ref.
	ErrNotOnProtectedRef = errors.New("not on the first-parent history of the protected ref")
	// ErrUnsigned: the commit carries no signature, or none by a trusted key.
	ErrUnsigned = errors.New("no valid signature by a trusted key")
	// ErrMissingTrailer: a required trailer is absent or empty.
	ErrMissingTrailer = errors.New("required trailer missing")
	// ErrNotProtectedRef: the caller named a ref other than the protected
	// ref the promoter is configured with, or the policy repository's
	// Repository document declares another protected ref.
	ErrNotProtectedRef = errors.New("not the configured protected ref")

	// ErrNotFound: a revision, commit or file does not exist.
	ErrNotFound = errors.New("not found")
	// ErrIncompleteHistory: the first-parent walk reached a commit that is
	// not in the repository (a shallow clone); the commit cannot be judged.
	ErrIncompleteHistory = errors.New("incomplete history")
	// ErrBadKeyring: the trusted keyring could not be read (a configuration error, not a refusal).
	ErrBadKeyring = errors.New("invalid trusted keyring")
)

// RefusalError reports why a commit is refused. It unwraps to ErrNotReviewed
// and to the specific sentinel in Err.
type RefusalError struct {
	Commit string // full hex commit hash
	Ref    string // the protected ref
	Reason string // human-readable detail, never secret
	Err    error  // ErrNotOnProtectedRef, ErrNotProtectedRef, ErrUnsigned or ErrMissingTrailer
}

func (e *RefusalError) Error() string {
	if e.Commit == "" {
		return fmt.Sprintf("not reviewed for %s: %s", e.Ref, e.Reason)
	}
	return fmt.Sprintf("commit %s not reviewed for %s: %s", short(e.Commit), e.Ref, e.Reason)
}

// Unwrap returns ErrNotReviewed and the specific reason.
func (e *RefusalError) Unwrap() []error { return []error{ErrNotReviewed, e.Err} }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
