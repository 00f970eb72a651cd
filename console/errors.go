package console

import (
	"errors"
	"fmt"
)

// Errors callers of the read functions can test with errors.Is.
var (
	// ErrNotFound: the environment, release, target or moment has no record.
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: a path or query parameter is malformed.
	ErrBadRequest = errors.New("bad request")
	// ErrForbidden: the request carried no acceptable credentials.
	ErrForbidden = errors.New("credentials required")
)

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadRequest}, args...)...)
}
