package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// RemoteOptions configures a JWKS URL key source. The zero value is valid.
type RemoteOptions struct {
	// Client fetches the JWKS. Default: an http.Client with a 10 s timeout.
	Client *http.Client
	// Interval between refreshes. Default 5 minutes.
	Interval time.Duration
	// MaxBytes bounds the JWKS document. Default 1 MiB.
	MaxBytes int64
	// Logger receives refresh failures. Default: discard.
	Logger *slog.Logger
	// UnknownKeyRefresh bounds the refreshes a token naming a key id the
	// set lacks triggers between the scheduled ones: at most one per
	// UnknownKeyRefresh. Default DefaultUnknownKeyRefresh; negative: none.
	UnknownKeyRefresh time.Duration
	// Now is the clock of that bound. Default time.Now.
	Now func() time.Time
}

// withDefaults sets the defaults a file and a URL share: a 5-minute
// interval and a logger that discards.
func (o RemoteOptions) withDefaults() RemoteOptions {
	if o.Interval <= 0 {
		o.Interval = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.UnknownKeyRefresh == 0 {
		o.UnknownKeyRefresh = DefaultUnknownKeyRefresh
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// RemoteKeys is a KeySource that fetches a JWKS document from one configured
// URL on a schedule (with ETag revalidation), and between two scheduled
// fetches when a token names a key id the set lacks, at most once per
// RemoteOptions.UnknownKeyRefresh. It is the only place that fetches keys:
// a token can make it fetch sooner, never elsewhere. A failed refresh keeps
// the last good set.
type RemoteKeys struct {
	url     string
	shown   string // url as errors and logs name it: without credentials
	opts    RemoteOptions
	unknown *unknownKeyLimiter

	set atomic.Pointer[KeySet]

	mu   sync.Mutex // serialises refreshes
	etag string
	gen  uint64

	stats refreshStats
}

// NewRemoteKeys returns a key source for rawURL. It holds no keys until the
// first successful Refresh.
func NewRemoteKeys(rawURL string, opts RemoteOptions) *RemoteKeys {
	opts = opts.withDefaults()
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	r := &RemoteKeys{url: rawURL, shown: displayURL(rawURL), opts: opts, unknown: newUnknownKeyLimiter(opts)}
	r.set.Store(&KeySet{})
	return r
}

var _ UnknownKeyRefresher = (*RemoteKeys)(nil)

// RefreshForUnknownKey implements UnknownKeyRefresher.
func (r *RemoteKeys) RefreshForUnknownKey(ctx context.Context, kid string) bool {
	return r.unknown.refresh(kid, r.KeySet, func() {
		if err := r.Refresh(ctx); err != nil {
			r.opts.Logger.Warn("jwks refresh for an unknown key id failed", "url", r.shown, "err", err)
		}
	})
}

// KeySet returns the last successfully fetched set (empty before the first).
func (r *RemoteKeys) KeySet() *KeySet { return r.set.Load() }

// RefreshStats reports when a fetch last succeeded (a 304 included) and
// how many failed.
func (r *RemoteKeys) RefreshStats() (lastSuccess time.Time, failures uint64) { return r.stats.get() }

// Refresh fetches the JWKS now. A 304 keeps the current set.
func (r *RemoteKeys) Refresh(ctx context.Context) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { r.stats.record(err) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return fmt.Errorf("fetch jwks %s: %w", r.shown, withoutURL(err))
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	if r.etag != "" {
		req.Header.Set("If-None-Match", r.etag)
	}
	resp, err := r.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch jwks %s: %w", r.shown, withoutURL(err))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil
	case http.StatusOK:
	default:
		return fmt.Errorf("fetch jwks %s: status %d", r.shown, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, r.opts.MaxBytes+1))
	if err != nil {
		return fmt.Errorf("fetch jwks %s: %w", r.shown, err)
	}
	if int64(len(body)) > r.opts.MaxBytes {
		return fmt.Errorf("fetch jwks %s: document larger than %d bytes", r.shown, r.opts.MaxBytes)
	}
	keys, err := ParseJWKS(r.shown, body)
	if err != nil {
		return err
	}
	r.gen++
	r.etag = resp.Header.Get("ETag")
	r.set.Store(&KeySet{Keys: keys, Generation: r.gen})
	return nil
}

// Run refreshes every Interval until ctx ends, logging failures and keeping
// the last good set. It returns ctx's error.
func (r *RemoteKeys) Run(ctx context.Context) error {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := r.Refresh(ctx); err != nil && !errors.Is(err, context.Canceled) {
				r.opts.Logger.Warn("jwks refresh failed", "url", r.shown, "err", err)
			}
		}
	}
}

// displayURL is a JWKS URL as errors and logs name it: a password in it
// is masked and its query (an API key, a signed-URL token) left out, so
// that a refresh a client can provoke with an unknown key id never logs a
// credential.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	query := u.RawQuery != "" || u.ForceQuery
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	if query {
		return u.String() + "?…"
	}
	return u.String()
}

// withoutURL returns err without the *url.Error around it, whose message
// repeats the request URL with its query (the caller names the URL).
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
