package bundle

import "errors"

// ErrDigestMismatch reports a recorded digest that does not match the
// content it covers.
var ErrDigestMismatch = errors.New("digest mismatch")
