// Package embedded runs the CNCF Distribution registry (distribution/v3,
// OCI Distribution Specification 1.1) in-process with filesystem storage:
// the embedded default registry of `configpub registry serve`, demos and
// tests.
package embedded

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"

	// The storage drivers register themselves with the factory.
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

// Options configure the embedded registry.
type Options struct {
	// Dir is the filesystem storage root, created if missing. Required
	// unless InMemory is set.
	Dir string
	// InMemory keeps everything in process memory (Distribution's inmemory
	// driver) and stores nothing on disk: for benchmarks and throwaway
	// tests only. Default false.
	InMemory bool
	// NoDelete refuses deletes (405, as a registry configured without
	// storage.delete.enabled): for tests of that path. Default false.
	NoDelete bool
}

// Registry is an in-process Distribution registry.
type Registry struct {
	Dir string // storage root; empty when in memory
	app *handlers.App
}

// New builds the registry application over filesystem storage rooted at
// opts.Dir (or in memory). Upload purging is off and deletes are enabled
// unless opts.NoDelete;
// the HTTP secret that signs upload state is random per instance.
// Distribution logs through logrus; configpub never touches its global
// settings here.
func New(ctx context.Context, opts Options) (r *Registry, err error) {
	driver := configuration.Parameters{}
	name := "inmemory"
	if !opts.InMemory {
		if opts.Dir == "" {
			return nil, errors.New("embedded registry: storage directory is empty")
		}
		if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("embedded registry: %w", err)
		}
		name, driver = "filesystem", configuration.Parameters{"rootdirectory": opts.Dir}
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("embedded registry: %w", err)
	}
	cfg := &configuration.Configuration{
		Version: "0.1",
		Storage: configuration.Storage{
			name:          driver,
			"delete":      configuration.Parameters{"enabled": !opts.NoDelete},
			"maintenance": configuration.Parameters{"uploadpurging": map[any]any{"enabled": false}},
			// Blob descriptors (digest, size, media type) cached in process
			// memory: existence checks and the blob checks behind a manifest
			// PUT skip the storage driver. Content is always read from storage.
			"cache": configuration.Parameters{"blobdescriptor": "inmemory"},
		},
	}
	cfg.HTTP.Secret = hex.EncodeToString(secret)
	cfg.Log.AccessLog.Disabled = true
	// NewApp panics on a bad configuration; ours is fixed, but keep the
	// promise that constructors do not panic.
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("embedded registry: %v", p)
		}
	}()
	app := handlers.NewApp(ctx, cfg)
	dir := opts.Dir
	if opts.InMemory {
		dir = ""
	}
	return &Registry{Dir: dir, app: app}, nil
}

// ServeHTTP serves the OCI distribution API (/v2/...).
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) { r.app.ServeHTTP(w, req) }

// Close releases the application's background resources.
func (r *Registry) Close() error { return r.app.Shutdown() }

// Serve listens on addr (for example "127.0.0.1:5000") and serves the
// registry over plain HTTP until ctx is done, then shuts down gracefully.
// ready, when not nil, is called with the bound address once listening.
func (r *Registry) Serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("registry serve: %w", err)
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 30 * time.Second}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("registry serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("registry serve: shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("registry serve: %w", err)
	}
	return nil
}
