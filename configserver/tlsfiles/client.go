package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Transport is an http.RoundTripper for a client whose TLS files are
// renewed while it runs: a CA bundle the server's certificate must chain to
// (instead of the system roots) and, for mutual TLS, a client certificate
// and its key (a SPIFFE or cert-manager certificate renewed hourly or
// daily). Before a request, at most once an interval, it reads the files
// again; when they changed and form a consistent set, later requests use a
// new connection pool with them (the old pool's idle connections are
// closed), and a set that does not (a certificate written without its new
// key yet) keeps the one in use.
type Transport struct {
	paths paths
	opts  Options

	cur atomic.Pointer[clientState]

	mu        sync.Mutex // serialises reloads
	checkedAt time.Time
	warner    expiryWarner
}

// clientState is one consistent read of the client's files.
type clientState struct {
	read      contents // to notice a change
	transport *http.Transport
	leaf      *x509.Certificate // nil without a client certificate
}

// NewTransport reads caFile (may be empty: the system roots) and, when
// certFile is not empty, the client certificate certFile with its key
// keyFile (both PEM). opts.Interval (default 1 minute), Logger and Now
// apply.
func NewTransport(caFile, certFile, keyFile string, opts Options) (*Transport, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	t := &Transport{paths: paths{ca: caFile, cert: certFile, key: keyFile}, opts: withDefaults(opts)}
	if _, err := t.Reload(); err != nil {
		return nil, err
	}
	t.checkedAt = t.opts.Now()
	return t, nil
}

// RoundTrip sends req with the files read last, reading them again first
// when an interval has passed since they were read.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	if now := t.opts.Now(); now.Sub(t.checkedAt) >= t.opts.Interval {
		t.checkedAt = now
		t.mu.Unlock()
		t.check()
	} else {
		t.mu.Unlock()
	}
	return t.cur.Load().transport.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the pool in use.
func (t *Transport) CloseIdleConnections() { t.cur.Load().transport.CloseIdleConnections() }

// ClientCertificate returns the client certificate in use, nil without one.
func (t *Transport) ClientCertificate() *x509.Certificate { return t.cur.Load().leaf }

// Reload reads the files again and reports whether what is used changed.
// Files that did not change change nothing; an error keeps what is in use.
func (t *Transport) Reload() (changed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, err := t.paths.read()
	if err != nil {
		return false, err
	}
	old := t.cur.Load()
	if old != nil && c.equal(old.read) {
		return false, nil
	}
	pool, pair, err := t.paths.parse(c)
	if err != nil {
		return false, err
	}
	s := clientState{read: c}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Time: t.opts.Now}
	if pair != nil {
		cfg.Certificates = []tls.Certificate{*pair}
		s.leaf = pair.Leaf
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	s.transport = tr
	t.cur.Store(&s)
	if old != nil {
		old.transport.CloseIdleConnections()
	}
	return true, nil
}

// check reloads and logs the outcome and, at most hourly, that the client
// certificate in use is near its expiry (within a fifth of its lifetime) or
// past it.
func (t *Transport) check() {
	changed, err := t.Reload()
	switch {
	case err != nil:
		t.opts.Logger.Warn("TLS files not reloaded; the ones in use are kept", "err", err)
	case changed:
		attrs := []any{"ca", t.paths.ca}
		if c := t.ClientCertificate(); c != nil {
			attrs = append(attrs, certAttrs(t.paths.cert, c)...)
		}
		t.opts.Logger.Info("TLS files reloaded", attrs...)
	}
	if c := t.ClientCertificate(); c != nil {
		t.warner.warn(t.opts.Logger, c, t.paths.cert, t.opts.Now())
	}
}
