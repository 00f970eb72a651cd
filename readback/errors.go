package readback

import "errors"

// Errors.
var (
	// ErrInvalidStatus: a runtime answered with a status document that is
	// malformed, too large, or about another identity. Nothing is recorded.
	ErrInvalidStatus = errors.New("invalid runtime status")
	// ErrInvalidReceipt: a receipt names a snapshot that is not one of its
	// identity and audience (or a publication that is not the snapshot's).
	// Nothing is recorded.
	ErrInvalidReceipt = errors.New("receipt does not match the store")
	// ErrUnreachable: the runtime's endpoint could not be read (network).
	// Nothing is recorded.
	ErrUnreachable = errors.New("runtime status endpoint unreachable")
	// ErrRefused: the runtime's endpoint answered, but not with a status
	// (a non-200 answer, with the runtime's reason code when it gave one).
	// Nothing is recorded.
	ErrRefused = errors.New("runtime status endpoint refused the request")
)
