// Package tlsfiles uses TLS certificates, keys and CA bundles from files
// that are renewed while the process runs: a server's certificate and client
// CA bundle (Files), a client's CA bundle and client certificate
// (Transport).
//
// Certificates are short-lived where they are issued automatically
// (cert-manager's default is 90 days, renewed at two thirds of its life;
// SPIFFE issuers renew hourly) and are renewed by rewriting the files a
// process was started with: a Kubernetes Secret mounted as a volume is
// updated in place. A server that read its files once serves an expired
// certificate after the first renewal it missed, and every client refuses
// it; a client presents an expired certificate, and every server refuses
// it. Both types read the files again every interval and use what they
// read last; a renewal that is half-written (a certificate without its new
// key) or unreadable keeps the set in use until a later read finds a
// consistent one.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures Files. The zero value is valid.
type Options struct {
	// Interval between reads of the files by Run. Default 1 minute.
	Interval time.Duration
	// Logger receives reloads, failed reloads and expiry warnings.
	// Default: discard.
	Logger *slog.Logger
	// Now is the clock for expiry warnings and for verifying client
	// certificates. Default time.Now.
	Now func() time.Time
}

func withDefaults(opts Options) Options {
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return opts
}

// paths names a CA bundle and a certificate with its key, each optional
// ("" for none).
type paths struct{ ca, cert, key string }

// contents is one read of paths: nil for a file not named.
type contents struct{ ca, cert, key []byte }

func (c contents) equal(o contents) bool {
	return bytes.Equal(c.ca, o.ca) && bytes.Equal(c.cert, o.cert) && bytes.Equal(c.key, o.key)
}

// read reads every file p names.
func (p paths) read() (contents, error) {
	var c contents
	for _, f := range []struct {
		path, what string
		dst        *[]byte
	}{{p.ca, "CA bundle", &c.ca}, {p.cert, "TLS certificate", &c.cert}, {p.key, "TLS key", &c.key}} {
		if f.path == "" {
			continue
		}
		b, err := os.ReadFile(f.path)
		if err != nil {
			return contents{}, fmt.Errorf("read %s: %w", f.what, err)
		}
		*f.dst = b
	}
	return c, nil
}

// parse parses c: the CA bundle's certificates (nil pool without one) and
// the certificate with its key (nil without one). A certificate that does
// not go with its key (a renewal read half-way) is an error.
func (p paths) parse(c contents) (*x509.CertPool, *tls.Certificate, error) {
	var pool *x509.CertPool
	if p.ca != "" {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(c.ca) {
			return nil, nil, fmt.Errorf("CA bundle %s: no PEM certificate", p.ca)
		}
	}
	if p.cert == "" {
		return pool, nil, nil
	}
	pair, err := tls.X509KeyPair(c.cert, c.key)
	if err != nil {
		return nil, nil, fmt.Errorf("TLS certificate %s and key %s: %w", p.cert, p.key, err)
	}
	return pool, &pair, nil
}

// Files is a server TLS configuration read from files. It is safe for
// concurrent use.
type Files struct {
	paths paths
	opts  Options

	cur atomic.Pointer[state]

	mu     sync.Mutex // serialises reloads
	warner expiryWarner
}

// state is one consistent read of the files.
type state struct {
	read   contents // to notice a change
	config *tls.Config
	leaf   *x509.Certificate
}

// Load reads certFile and keyFile (PEM) and, when caFile is not empty, a
// bundle of client CA certificates (PEM), which makes the configuration
// require and verify client certificates (mTLS).
func Load(certFile, keyFile, caFile string, opts Options) (*Files, error) {
	f := &Files{paths: paths{ca: caFile, cert: certFile, key: keyFile}, opts: withDefaults(opts)}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// TLSConfig returns the configuration to serve with: each handshake gets
// the files read last.
func (f *Files) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return f.cur.Load().config, nil
		},
	}
}

// Certificate returns the certificate in use.
func (f *Files) Certificate() *x509.Certificate { return f.cur.Load().leaf }

// Reload reads the files again and reports whether what is served changed.
// Files that did not change change nothing; an error keeps what is in use.
func (f *Files) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.paths.read()
	if err != nil {
		return false, err
	}
	if old := f.cur.Load(); old != nil && c.equal(old.read) {
		return false, nil
	}
	pool, pair, err := f.paths.parse(c)
	if err != nil {
		return false, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*pair}, Time: f.opts.Now}
	if pool != nil {
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	f.cur.Store(&state{read: c, config: cfg, leaf: pair.Leaf})
	return true, nil
}

// Run reads the files every interval until ctx ends, logging each change
// (subject, serial number and expiry; never key material), each failed
// read, and — at most hourly — that the certificate in use is near its
// expiry (within a fifth of its lifetime) or past it. It returns ctx's error.
func (f *Files) Run(ctx context.Context) error {
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	f.Check()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			f.Check()
		}
	}
}

// Check is one step of Run: reload, then warn about expiry.
func (f *Files) Check() {
	changed, err := f.Reload()
	switch {
	case err != nil:
		f.opts.Logger.Warn("TLS files not reloaded; the certificate in use is kept", "cert", f.paths.cert, "err", err)
	case changed:
		f.opts.Logger.Info("TLS files reloaded", append(certAttrs(f.paths.cert, f.Certificate()), "clientCA", f.paths.ca != "")...)
	}
	f.warner.warn(f.opts.Logger, f.Certificate(), f.paths.cert, f.opts.Now())
}

// certAttrs are the log attributes naming certificate c read from file:
// never key material.
func certAttrs(file string, c *x509.Certificate) []any {
	return []any{"cert", file, "subject", c.Subject.String(), "serial", c.SerialNumber.String(),
		"notAfter", c.NotAfter.UTC().Format(time.RFC3339)}
}

// ErrExpired and ErrExpiring classify an expiry warning.
var (
	ErrExpired  = errors.New("TLS certificate expired")
	ErrExpiring = errors.New("TLS certificate near its expiry")
)

// Expiry reports whether the certificate in use at t is past its expiry
// (ErrExpired) or within a fifth of its lifetime of it (ErrExpiring), or nil.
func (f *Files) Expiry(t time.Time) error { return expiry(f.Certificate(), t) }

func expiry(c *x509.Certificate, t time.Time) error {
	left := c.NotAfter.Sub(t)
	switch {
	case left <= 0:
		return fmt.Errorf("%w at %s", ErrExpired, c.NotAfter.UTC().Format(time.RFC3339))
	case left < c.NotAfter.Sub(c.NotBefore)/5:
		return fmt.Errorf("%w: expires at %s, in %s", ErrExpiring, c.NotAfter.UTC().Format(time.RFC3339), left.Round(time.Minute))
	}
	return nil
}

// expiryWarner logs, at most hourly per certificate, that a certificate in
// use is near its expiry or past it: its files were not renewed.
type expiryWarner struct {
	mu       sync.Mutex
	warnedAt time.Time // last warning
	warnedOf time.Time // NotAfter of the certificate warned about
}

func (w *expiryWarner) warn(logger *slog.Logger, c *x509.Certificate, file string, now time.Time) {
	err := expiry(c, now)
	if err == nil {
		return
	}
	w.mu.Lock()
	if c.NotAfter.Equal(w.warnedOf) && now.Sub(w.warnedAt) < time.Hour {
		w.mu.Unlock()
		return
	}
	w.warnedOf, w.warnedAt = c.NotAfter, now
	w.mu.Unlock()
	level := slog.LevelWarn
	if errors.Is(err, ErrExpired) {
		level = slog.LevelError
	}
	logger.Log(context.Background(), level, "TLS certificate not renewed: renew the files it was read from",
		"cert", file, "serial", c.SerialNumber.String(), "err", err)
}
