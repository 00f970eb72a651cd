package configserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServerOptions configures NewServer and Serve. The zero value is valid.
type ServerOptions struct {
	ReadHeaderTimeout time.Duration // default 5 s: slow-header clients are cut off
	ReadTimeout       time.Duration // default 10 s
	WriteTimeout      time.Duration // default 30 s
	IdleTimeout       time.Duration // default 120 s
	// MaxHeaderBytes bounds request headers; past it the client gets 431.
	// Default 64 KiB (net/http adds 4 KiB of slack).
	MaxHeaderBytes int
	// ShutdownTimeout bounds the graceful drain after ctx ends. Default 15 s.
	ShutdownTimeout time.Duration
	// TLSConfig, when set, makes Serve speak TLS (package tlsfiles makes
	// one from certificate files that are renewed while serving).
	TLSConfig *tls.Config
	// Logger receives http.Server errors (handshake failures, timeouts).
	// Default: discard.
	Logger *slog.Logger
}

func (o *ServerOptions) defaults() {
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 5 * time.Second
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 10 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 120 * time.Second
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// NewServer returns an http.Server for h with every timeout and limit set.
// When h is a Config Server handler (NewHandler), shutting the server down
// answers every held watch request at once.
func NewServer(h http.Handler, opts ServerOptions) *http.Server {
	opts.defaults()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: opts.ReadHeaderTimeout,
		ReadTimeout:       opts.ReadTimeout,
		WriteTimeout:      opts.WriteTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		TLSConfig:         opts.TLSConfig,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for in-flight requests; held watch requests are
	// answered at once rather than at the end of their wait.
	if we, ok := h.(watchEnder); ok {
		srv.RegisterOnShutdown(we.EndWatches)
	}
	return srv
}

// Serve serves h on ln until ctx ends, then shuts down gracefully (in-flight
// requests finish within ShutdownTimeout). It returns nil after a clean
// shutdown.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, opts ServerOptions) error {
	opts.defaults()
	srv := NewServer(h, opts)
	errc := make(chan error, 1)
	go func() {
		if opts.TLSConfig != nil {
			errc <- srv.Serve(tls.NewListener(ln, opts.TLSConfig))
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown %s: %w", ln.Addr(), err)
	}
	// Shutdown does not wait for the connections the handler took over
	// (held watches, answered by EndWatches on goroutines of their own):
	// wait for their answers within the same bound, so that a process
	// exiting after Serve does not cut them off.
	if we, ok := h.(watchEnder); ok {
		we.EndWatches() // idempotent; Shutdown started it already
		for we.ParkedWatches() > 0 && sctx.Err() == nil {
			select {
			case <-sctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	}
	return nil
}
