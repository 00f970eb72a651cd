package auth

import (
	"errors"
	"strconv"
)

// ErrInvalidToken is wrapped by every verification failure. Callers answer
// 401 for it and must not reveal which check failed to the client.
var ErrInvalidToken = errors.New("invalid bearer token")

// ErrNoKeys is returned when a key source yields no usable verification key.
var ErrNoKeys = errors.New("no usable verification keys")

// TokenError says which check a token failed. Reason is safe to log: it never
// contains the token or any claim value taken from it.
type TokenError struct {
	Reason string
	kid    string // the key id an unknown-key refusal names (from the token)
}

func (e *TokenError) Error() string { return "invalid bearer token: " + e.Reason }

// Unwrap returns ErrInvalidToken.
func (e *TokenError) Unwrap() error { return ErrInvalidToken }

func tokenError(reason string) error { return &TokenError{Reason: reason} }

// KeyError reports a configured key that cannot be used, naming its source
// and position.
type KeyError struct {
	Source string // file name or URL
	Index  int    // position of the key in the source (0-based)
	KeyID  string
	Err    error
}

func (e *KeyError) Error() string {
	if e.KeyID != "" {
		return "key source " + e.Source + ": key " + strconv.Itoa(e.Index) + " (kid " + e.KeyID + "): " + e.Err.Error()
	}
	return "key source " + e.Source + ": key " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

// Unwrap returns the underlying cause.
func (e *KeyError) Unwrap() error { return e.Err }
