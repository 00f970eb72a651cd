// Package registrytest starts a real CNCF Distribution registry
// (distribution/v3, filesystem storage; OCI Distribution Specification 1.1)
// in-process on a loopback httptest server, counts the requests it serves,
// and exposes its storage so tests can tamper with stored blobs.
package registrytest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/configpub/configpub/registry/embedded"
)

// Options configure a test registry. The zero value is valid.
type Options struct {
	// Wrap, when set, wraps the counted registry handler, for example with
	// a FaultInjector. Requests it answers itself are not counted.
	Wrap func(http.Handler) http.Handler
	// Dir is the storage root; empty means a fresh t.TempDir().
	Dir string
	// InMemory stores nothing on disk (Distribution's inmemory driver);
	// BlobPath is meaningless then. For benchmarks.
	InMemory bool
	// NoDelete makes Distribution refuse deletes, as a registry configured
	// without them.
	NoDelete bool
	// Backend, when set, is served instead of Distribution (for example
	// go-containerregistry's registry.New(), a lighter in-memory registry
	// for benchmarks); counting and Wrap still apply, Dir and BlobPath do
	// not.
	Backend http.Handler
}

// Registry is a running test registry.
type Registry struct {
	// Host is "127.0.0.1:<port>", the registry part of references.
	Host string
	// URL is "http://127.0.0.1:<port>".
	URL string
	// Dir is the filesystem storage root.
	Dir string

	mu     sync.Mutex
	counts map[string]int
	conns  int // connections accepted since the last Reset
}

var quietOnce sync.Once

// New starts a registry for the duration of the test. Distribution's
// logrus output is discarded once per test binary (a test-only concession
// to its global logger): tests read errors from responses, not logs.
func New(t testing.TB, opts Options) *Registry {
	t.Helper()
	quietOnce.Do(func() { logrus.SetLevel(logrus.PanicLevel); logrus.SetOutput(io.Discard) })
	dir := opts.Dir
	if dir == "" && !opts.InMemory && opts.Backend == nil {
		dir = t.TempDir()
	}
	var app http.Handler = opts.Backend
	closeApp := func() error { return nil }
	if app == nil {
		reg, err := embedded.New(context.Background(), embedded.Options{Dir: dir, InMemory: opts.InMemory, NoDelete: opts.NoDelete})
		if err != nil {
			t.Fatalf("registrytest: %v", err)
		}
		app, closeApp = reg, reg.Close
	}
	r := &Registry{Dir: dir, counts: map[string]int{}}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		app.ServeHTTP(sw, req)
		r.count(req, sw.status)
	})
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.mu.Lock()
			r.conns++
			r.mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		_ = closeApp()
	})
	r.URL = srv.URL
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// statusWriter records the status code a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (r *Registry) count(req *http.Request, status int) {
	kind := "other"
	p := req.URL.Path
	switch {
	case strings.Contains(p, "/blobs/uploads"):
		kind = "upload"
	case strings.Contains(p, "/blobs/"):
		kind = "blob"
	case strings.Contains(p, "/manifests/"):
		kind = "manifest"
	}
	r.mu.Lock()
	r.counts[req.Method+" "+kind]++
	r.counts[req.Method]++
	r.counts["status "+strconv.Itoa(status)]++
	r.mu.Unlock()
}

// Count returns how many requests with key were served since the last
// Reset. Keys are a method ("PUT") or a method and kind ("PUT manifest",
// "POST upload", "HEAD blob", "GET manifest") or a response status
// ("status 404").
func (r *Registry) Count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

// Writes returns the number of PUT, POST and PATCH requests served since
// the last Reset: any upload of a blob or manifest shows up here.
func (r *Registry) Writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts["PUT"] + r.counts["POST"] + r.counts["PATCH"]
}

// Total returns the number of requests served since the last Reset.
func (r *Registry) Total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range []string{"GET", "HEAD", "PUT", "POST", "PATCH", "DELETE"} {
		n += r.counts[m]
	}
	return n
}

// Conns returns the number of TCP connections accepted since the last
// Reset: with keep-alive working, at most the client's concurrency.
func (r *Registry) Conns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns
}

// Reset zeroes the request counters.
func (r *Registry) Reset() {
	r.mu.Lock()
	r.counts = map[string]int{}
	r.conns = 0
	r.mu.Unlock()
}

// BlobPath returns the filesystem path of the stored blob with the given
// digest ("sha256:<hex>"), for tampering tests.
func (r *Registry) BlobPath(digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(r.Dir, "docker", "registry", "v2", "blobs", algo, hex[:2], hex, "data")
}

// Counts returns a copy of all counters since the last Reset.
func (r *Registry) Counts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}
