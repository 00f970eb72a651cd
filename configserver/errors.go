package configserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// Sentinels a Store returns; the handler maps them to HTTP statuses.
var (
	// ErrNotFound: no current snapshot (or no such snapshot for the identity).
	ErrNotFound = errors.New("not found")
	// ErrGone: the identity is retired: the active release of its
	// environment no longer contains it (410 Gone).
	ErrGone = errors.New("identity retired")
	// ErrUnavailable: the store cannot confirm what is current (database
	// unreachable or stale); the handler answers 503 with Retry-After.
	ErrUnavailable = errors.New("store unavailable")
	// ErrInvalidEvidence: an evidence report names a snapshot that is not
	// one of its identity's, or a publication that is not the snapshot's.
	ErrInvalidEvidence = errors.New("evidence does not match the identity's snapshots")
	// ErrLeaseEnded: the current delivery's lease ended by the server's
	// clock and no renewal replaced it (the renewals stopped, or its
	// environment is no longer renewed); the handler answers 503 with
	// Retry-After rather than a manifest every runtime must refuse.
	ErrLeaseEnded = errors.New("lease ended and not renewed")
	// ErrIntegrity: stored data is inconsistent (bytes do not match their
	// digest, a manifest does not match its pointer); never served.
	ErrIntegrity = errors.New("stored data failed an integrity check")
)

// httpError is the one error type handlers return. Message is sent to the
// client and must never contain a token, a body or a secret; reason is for
// the access log only.
type httpError struct {
	status  int
	code    string
	message string
	reason  string
	err     error
	// retryAfter is the Retry-After of a 429, in seconds.
	retryAfter int
}

func (e *httpError) Error() string {
	if e.err != nil {
		return e.reason + ": " + e.err.Error()
	}
	return e.reason
}

func (e *httpError) Unwrap() error { return e.err }

func errBadRequest(msg string) *httpError {
	return &httpError{status: http.StatusBadRequest, code: "bad_request", message: msg, reason: msg}
}

// errUnauthorized never tells the client which check failed.
func errUnauthorized(err error) *httpError {
	return &httpError{status: http.StatusUnauthorized, code: "unauthorized",
		message: "a valid bearer token is required", reason: "token refused", err: err}
}

// errForbidden is identical for every identity or audience mismatch, whether
// or not the other identity or snapshot exists.
func errForbidden(reason string) *httpError {
	return &httpError{status: http.StatusForbidden, code: "forbidden",
		message: "the token does not grant access to this configuration", reason: reason}
}

func errNotFound() *httpError {
	return &httpError{status: http.StatusNotFound, code: "not_found",
		message: "no current configuration for this identity", reason: "no current snapshot"}
}

func errGone() *httpError {
	return &httpError{status: http.StatusGone, code: "gone",
		message: "this identity is retired: the active release of its environment no longer contains it",
		reason:  "identity retired"}
}

func errMethod(allow string) *httpError {
	return &httpError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
		message: "method not allowed; allowed: " + allow, reason: "method not allowed"}
}

func errUnavailable(err error) *httpError {
	return &httpError{status: http.StatusServiceUnavailable, code: "unavailable",
		message: "configuration store unavailable; retry later", reason: "store unavailable", err: err}
}

// errLeaseEnded is the 503 for a current pointer whose lease ended: the
// runtime keeps what it runs until its own lease of it ends and asks again.
func errLeaseEnded(err error) *httpError {
	return &httpError{status: http.StatusServiceUnavailable, code: "lease_ended",
		message: "the lease of this configuration ended and has not been renewed; retry later",
		reason:  "lease ended", err: err}
}

func errInternal(err error) *httpError {
	return &httpError{status: http.StatusInternalServerError, code: "internal",
		message: "internal error", reason: "internal", err: err}
}

// storeError maps a Store error to its HTTP error.
func storeError(err error) *httpError {
	switch {
	case errors.Is(err, ErrNotFound):
		return errNotFound()
	case errors.Is(err, ErrGone):
		return errGone()
	case errors.Is(err, ErrUnavailable):
		return errUnavailable(err)
	case errors.Is(err, ErrLeaseEnded):
		return errLeaseEnded(err)
	default:
		return errInternal(err)
	}
}

// writeError is the one place an error response is written.
func (h *handler) writeError(w http.ResponseWriter, rl *reqLog, e *httpError) {
	rl.reason = e.reason
	rl.err = e.err
	hdr := w.Header()
	hdr["Content-Type"] = []string{"application/json"}
	hdr["Cache-Control"] = []string{"no-store"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	switch e.status {
	case http.StatusUnauthorized:
		hdr["Www-Authenticate"] = []string{`Bearer realm="configpub"`}
	case http.StatusServiceUnavailable:
		hdr["Retry-After"] = []string{strconv.Itoa(h.retryAfter)}
	case http.StatusTooManyRequests:
		hdr["Retry-After"] = []string{strconv.Itoa(e.retryAfter)}
	case http.StatusMethodNotAllowed:
		hdr["Allow"] = []string{allowFor(rl.route)}
	}
	body, err := json.Marshal(errorBody{Error: e.code, Message: e.message})
	if err != nil { // cannot happen for two strings
		body = []byte(`{"error":"internal"}`)
	}
	body = append(body, '\n')
	hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}
