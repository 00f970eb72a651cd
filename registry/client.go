package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// Options configure a Client. The zero value is valid.
type Options struct {
	// PlainHTTP talks http:// instead of https:// (loopback and test
	// registries). Default false.
	PlainHTTP bool
	// Credentials supplies registry credentials. Nil means the Docker
	// config file ($DOCKER_CONFIG/config.json or ~/.docker/config.json,
	// with its credential helpers), as oras and cosign read it.
	Credentials credentials.Store
	// Concurrency bounds the artifacts pushed at once. Default 8.
	Concurrency int
	// MaxRetries is how often a transient failure (5xx, 429, 408,
	// connection refused/reset, timeout) is retried. Default 5; negative
	// means no retries.
	MaxRetries int
	// RetryMinWait and RetryMaxWait bound the exponential back-off between
	// retries (a 429's Retry-After is honoured within them). Defaults 200ms
	// and 3s.
	RetryMinWait, RetryMaxWait time.Duration
	// Transport is the base HTTP transport. Nil means a clone of
	// http.DefaultTransport that keeps Concurrency*2 idle connections per
	// host, with the timeouts below.
	Transport http.RoundTripper
	// ResponseHeaderTimeout bounds the wait for a response's headers once
	// a request is sent (its body included), so a registry that accepts
	// connections and never answers fails the request (a timeout, retried
	// as MaxRetries says) instead of holding it for ever. Default 60s.
	// Connecting is bounded at 30s and the TLS handshake at 10s. There is
	// no bound on a whole request: a large upload or download takes as long
	// as it takes; give the context a deadline for that. Unused with
	// Transport.
	ResponseHeaderTimeout time.Duration
	// UserAgent sent with every request. Default "configpub".
	UserAgent string
	// Storage holds the repositories. Nil means remote OCI registries over
	// HTTP, configured by the fields above; OCILayout and Memory keep them
	// on disk or in memory instead (the HTTP fields are then unused).
	Storage Storage
}

// Client publishes, pulls and verifies artifacts. It is safe for
// concurrent use.
type Client struct {
	plainHTTP   bool
	concurrency int
	http        *auth.Client
	mono        *monolithic
	storage     Storage // nil: remote registries
}

// New returns a Client. It fails only when the Docker config file cannot
// be read (it is not read when opts.Storage is set).
func New(opts Options) (*Client, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	switch {
	case opts.MaxRetries == 0:
		opts.MaxRetries = 5
	case opts.MaxRetries < 0:
		opts.MaxRetries = 0
	}
	if opts.RetryMinWait <= 0 {
		opts.RetryMinWait = 200 * time.Millisecond
	}
	if opts.RetryMaxWait <= 0 {
		opts.RetryMaxWait = 3 * time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "configpub"
	}
	store := opts.Credentials
	switch {
	case store != nil:
	case opts.Storage != nil:
		store = credentials.NewMemoryStore() // no registry is contacted
	default:
		s, err := credentials.NewStoreFromDocker(credentials.StoreOptions{})
		if err != nil {
			return nil, fmt.Errorf("registry client: docker credentials: %w", err)
		}
		store = s
	}
	if opts.ResponseHeaderTimeout <= 0 {
		opts.ResponseHeaderTimeout = 60 * time.Second
	}
	base := opts.Transport
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 0
		t.MaxIdleConnsPerHost = opts.Concurrency * 2
		t.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = 10 * time.Second
		t.ResponseHeaderTimeout = opts.ResponseHeaderTimeout
		base = t
	}
	base = dateRecorder{base: base}
	policy := &retry.GenericPolicy{
		Retryable: transient,
		Backoff:   retry.DefaultBackoff,
		MinWait:   opts.RetryMinWait,
		MaxWait:   opts.RetryMaxWait,
		MaxRetry:  opts.MaxRetries,
	}
	hc := &http.Client{Transport: &retry.Transport{Base: base, Policy: func() retry.Policy { return policy }}}
	ac := &auth.Client{
		Client:     hc,
		Cache:      auth.NewCache(),
		Credential: credentials.Credential(store),
		Header:     http.Header{"User-Agent": {opts.UserAgent}},
	}
	return &Client{plainHTTP: opts.PlainHTTP, concurrency: opts.Concurrency, http: ac, mono: &monolithic{}, storage: opts.Storage}, nil
}

// repository opens the repository name ("registry[:port]/path"): an
// oras-go remote repository, or the Storage's target for it.
func (c *Client) repository(ctx context.Context, name string) (*repo, error) {
	if c.storage != nil {
		t, err := c.storage.Repository(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("open repository %s: %w", name, err)
		}
		return &repo{Target: t, name: name, path: name}, nil
	}
	r, err := remote.NewRepository(name)
	if err != nil {
		return nil, fmt.Errorf("%w repository %q: %w", ErrInvalid, name, err)
	}
	r.Client = c.http
	r.PlainHTTP = c.plainHTTP
	return &repo{Target: &remoteTarget{Repository: r, c: c}, name: name, path: r.Reference.Repository}, nil
}

// transient reports whether a request failed in a way that is worth
// retrying: server errors, throttling, and connection-level failures.
// Anything else (4xx, TLS and DNS errors) fails at once.
func transient(resp *http.Response, err error) (bool, error) {
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout(),
			errors.Is(err, syscall.ECONNREFUSED),
			errors.Is(err, syscall.ECONNRESET),
			errors.Is(err, io.ErrUnexpectedEOF),
			errors.Is(err, io.EOF):
			return true, nil
		}
		return false, err
	}
	switch resp.StatusCode {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, nil
	}
	return false, nil
}
