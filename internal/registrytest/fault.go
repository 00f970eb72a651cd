package registrytest

import (
	"net/http"
	"strconv"
	"sync"
)

// FaultInjector is an http.Handler placed in front of the real registry
// that answers some requests itself with an error status instead of
// forwarding them: a fake for faults (5xx, 429, an outage) that a healthy
// in-process registry cannot produce on demand.
type FaultInjector struct {
	Next http.Handler

	mu       sync.Mutex
	failNext int
	status   int
	down     bool
	hanging  bool
	injected int

	release     chan struct{}
	releaseOnce sync.Once
}

// NewFaultInjector wraps next; it forwards everything until told otherwise.
func NewFaultInjector(next http.Handler) *FaultInjector {
	return &FaultInjector{Next: next, release: make(chan struct{})}
}

// SetHanging makes every request wait, unanswered, until its client gives
// up or Release is called — a registry that accepts connections and never
// answers — until SetHanging(false).
func (f *FaultInjector) SetHanging(hanging bool) {
	f.mu.Lock()
	f.hanging = hanging
	f.mu.Unlock()
}

// Release ends every request SetHanging holds, now and later (call it in
// t.Cleanup so that the server can close).
func (f *FaultInjector) Release() { f.releaseOnce.Do(func() { close(f.release) }) }

// FailNext makes the next n requests fail with status (for 429 a
// Retry-After of 0 seconds is not sent, so the client's back-off applies).
func (f *FaultInjector) FailNext(n, status int) {
	f.mu.Lock()
	f.failNext, f.status = n, status
	f.mu.Unlock()
}

// SetDown makes every request fail with 503 until SetDown(false).
func (f *FaultInjector) SetDown(down bool) {
	f.mu.Lock()
	f.down = down
	f.mu.Unlock()
}

// Injected returns how many requests were answered with an injected fault.
func (f *FaultInjector) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// ServeHTTP injects the configured fault or forwards to Next.
func (f *FaultInjector) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	f.mu.Lock()
	status := 0
	switch {
	case f.hanging:
		f.injected++
		f.mu.Unlock()
		select {
		case <-req.Context().Done():
		case <-f.release:
		}
		return
	case f.down:
		status = http.StatusServiceUnavailable
	case f.failNext > 0:
		f.failNext--
		status = f.status
	}
	if status != 0 {
		f.injected++
	}
	f.mu.Unlock()
	if status == 0 {
		f.Next.ServeHTTP(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(faultBody)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(faultBody))
}

const faultBody = `{"errors":[{"code":"UNAVAILABLE","message":"injected fault"}]}`
