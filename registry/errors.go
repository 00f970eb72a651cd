package registry

import (
	"errors"
	"fmt"
)

// Sentinel errors; test with errors.Is.
var (
	// ErrNotFound: the manifest, blob or signature does not exist.
	ErrNotFound = errors.New("not found")
	// ErrDigestMismatch: content does not hash to the digest that names it.
	ErrDigestMismatch = errors.New("digest mismatch")
	// ErrSignature: no signature by a trusted key binds the manifest digest.
	ErrSignature = errors.New("signature not verified")
	// ErrUnsigned: the artifact carries no signature at all (its
	// signature tag does not exist); it matches ErrSignature too.
	ErrUnsigned = fmt.Errorf("%w: no signature", ErrSignature)
	// ErrIdentity: the artifact names another target than the one expected.
	ErrIdentity = errors.New("identity mismatch")
	// ErrConflict: a tag already names a different manifest.
	ErrConflict = errors.New("tag conflict")
	// ErrInvalid: an artifact or reference is malformed.
	ErrInvalid = errors.New("invalid")
)

// VerificationError reports why an artifact failed verification. Err is
// one of ErrNotFound, ErrDigestMismatch, ErrSignature, ErrIdentity or
// ErrInvalid.
type VerificationError struct {
	Ref    string // repository, e.g. "registry.example/configpub/prod/h/svc"
	Digest string // manifest digest, "sha256:<hex>"
	Reason string // what was wrong, naming the values involved
	Err    error
}

func (e *VerificationError) Error() string {
	return fmt.Sprintf("%s@%s: %s: %v", e.Ref, e.Digest, e.Reason, e.Err)
}

// Unwrap returns the sentinel.
func (e *VerificationError) Unwrap() error { return e.Err }
