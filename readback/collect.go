package readback

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/controltoken"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/strictjson"
)

// DefaultTokenTTL is the lifetime of each control token when
// Options.TokenTTL is 0.
const DefaultTokenTTL = time.Minute

// DefaultTimeout bounds one runtime request when Options.HTTPClient is nil.
const DefaultTimeout = 30 * time.Second

// DefaultConcurrency is how many runtimes Run reads at once when
// Options.Concurrency is 0.
const DefaultConcurrency = 8

// MaxConcurrency bounds Options.Concurrency.
const MaxConcurrency = 256

// Options configures a Collector. Signer is required.
type Options struct {
	// Signer is the control-plane key (ECDSA P-256) the runtimes trust as
	// a control key; never the delivery-manifest key.
	Signer crypto.Signer
	// Reload asks each runtime to load now (POST /reload) and records the
	// result it answers with; false reads GET /status only.
	Reload bool
	// Prefetch asks each runtime to verify its staged candidate now (POST
	// /prefetch) and records the READY or REJECTED it answers with. It
	// excludes Reload.
	Prefetch bool
	// TokenTTL is each control token's lifetime (at most 5 minutes). 0
	// means DefaultTokenTTL.
	TokenTTL time.Duration
	// HTTPClient sends the requests; it follows no redirect. nil means a
	// client with DefaultTimeout.
	HTTPClient *http.Client
	// Now tells the time. nil means time.Now.
	Now func() time.Time
	// Concurrency is how many runtimes Run reads and records at once (1
	// reads them in turn). 0 means DefaultConcurrency.
	Concurrency int
}

// Collector reads runtime status endpoints.
type Collector struct {
	opts Options
}

// NewCollector validates opts and returns a Collector.
func NewCollector(opts Options) (*Collector, error) {
	if opts.Signer == nil {
		return nil, errors.New("new collector: no control-plane signer")
	}
	if opts.Reload && opts.Prefetch {
		return nil, errors.New("new collector: reload and prefetch exclude each other")
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Concurrency < 1 || opts.Concurrency > MaxConcurrency {
		return nil, fmt.Errorf("new collector: concurrency %d not in [1, %d]", opts.Concurrency, MaxConcurrency)
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.TokenTTL < 0 || opts.TokenTTL > controltoken.MaxLifetime {
		return nil, fmt.Errorf("new collector: token lifetime %s not in (0, %s]", opts.TokenTTL, controltoken.MaxLifetime)
	}
	hc := http.Client{Timeout: DefaultTimeout}
	if opts.HTTPClient != nil {
		hc = *opts.HTTPClient
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.HTTPClient = &hc
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Collector{opts: opts}, nil
}

// Read asks t's endpoint for its status (or a reload) with a fresh control
// token for t's identity, and returns the validated answer. An answer about
// another identity, malformed or larger than bundle.MaxRuntimeStatusBytes is
// ErrInvalidStatus; a transport failure is ErrUnreachable, a non-200
// answer ErrRefused.
func (c *Collector) Read(ctx context.Context, t Target) (*bundle.RuntimeStatus, error) {
	method, path, scope := http.MethodGet, "/status", controltoken.ScopeStatus
	switch {
	case c.opts.Reload:
		method, path, scope = http.MethodPost, "/reload", controltoken.ScopeReload
	case c.opts.Prefetch:
		method, path, scope = http.MethodPost, "/prefetch", controltoken.ScopePrefetch
	}
	where := strings.TrimRight(t.Endpoint, "/") + path
	tok, err := controltoken.Sign(c.opts.Signer, t.Identity().String(), scope, c.opts.Now(), c.opts.TokenTTL)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", where, err)
	}
	req, err := http.NewRequestWithContext(ctx, method, where, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", where, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w: %v", where, ErrUnreachable, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, bundle.MaxRuntimeStatusBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w: %v", where, ErrUnreachable, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Reason string }
		_ = json.Unmarshal(body, &e)
		code := safeCode(e.Reason)
		hint := ""
		if code == controlTokenExpired {
			// The token was signed now: a runtime that finds it expired or
			// not yet valid has a clock far from this host's.
			hint = " (a token signed just now: the runtime's clock and this host's differ by more than its validity — check both run NTP)"
		}
		return nil, fmt.Errorf("read %s: %w: HTTP %d %s%s", where, ErrRefused, resp.StatusCode, code, hint)
	}
	if len(body) > bundle.MaxRuntimeStatusBytes {
		return nil, fmt.Errorf("read %s: %w: larger than %d bytes", where, ErrInvalidStatus, bundle.MaxRuntimeStatusBytes)
	}
	var st bundle.RuntimeStatus
	if err := strictjson.Decode(body, &st); err != nil {
		return nil, fmt.Errorf("read %s: %w: not one runtime status document", where, ErrInvalidStatus)
	}
	if err := validateStatus(&st, t.Identity()); err != nil {
		return nil, fmt.Errorf("read %s: %w: %v", where, ErrInvalidStatus, err)
	}
	return &st, nil
}

// controlTokenExpired is the reason a runtime's status endpoint gives a
// control token outside its validity (the wire contract's
// CONTROL_TOKEN_EXPIRED).
const controlTokenExpired = "CONTROL_TOKEN_EXPIRED"

var (
	uuidRE   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	reasonRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)
)

// safeCode returns s when it is a reason code, else "".
func safeCode(s string) string {
	if reasonRE.MatchString(s) {
		return s
	}
	return ""
}

// validateStatus checks the document's type and identity and every field
// that becomes part of a receipt.
func validateStatus(st *bundle.RuntimeStatus, want bundle.Identity) error {
	if st.Type != bundle.RuntimeStatusType {
		return fmt.Errorf("type %q, want %q", st.Type, bundle.RuntimeStatusType)
	}
	if st.Identity() != want {
		return fmt.Errorf("the runtime answers for %s, not %s", st.Identity(), want)
	}
	if bundle.Namespace(st.Audience) == "" {
		return fmt.Errorf("audience %q", st.Audience)
	}
	for _, s := range []struct {
		name  string
		state *bundle.SnapshotState
	}{{"current", st.Current}, {"lastKnownGood", st.LastKnownGood}, {"lastRejected", st.LastRejected}, {"candidate", st.Candidate}} {
		if s.state == nil {
			continue
		}
		if err := validateState(s.state); err != nil {
			return fmt.Errorf("%s: %v", s.name, err)
		}
	}
	if st.Current != nil && st.Current.Result != bundle.ResultApplied {
		return fmt.Errorf("current: result %q, want %s", st.Current.Result, bundle.ResultApplied)
	}
	if st.LastRejected != nil && st.LastRejected.Result != bundle.ResultRejected {
		return fmt.Errorf("lastRejected: result %q, want %s", st.LastRejected.Result, bundle.ResultRejected)
	}
	if st.Candidate != nil && st.Candidate.Result != bundle.ResultReady && st.Candidate.Result != bundle.ResultRejected {
		return fmt.Errorf("candidate: result %q, want READY or REJECTED", st.Candidate.Result)
	}
	return nil
}

func validateState(s *bundle.SnapshotState) error {
	if s.SnapshotID != "" && !uuidRE.MatchString(s.SnapshotID) {
		return errors.New("snapshotId is not a lowercase UUID")
	}
	if s.PublicationID != "" && !uuidRE.MatchString(s.PublicationID) {
		return errors.New("publicationId is not a lowercase UUID")
	}
	for _, d := range []struct{ name, v string }{{"artifactDigest", s.ArtifactDigest}, {"contentDigest", s.ContentDigest}, {"policyDigest", s.PolicyDigest}} {
		if d.v != "" && !digest.Valid(d.v) {
			return fmt.Errorf("%s is not sha256:<64 hex>", d.name)
		}
	}
	if s.Reason != "" && !reasonRE.MatchString(s.Reason) {
		return errors.New("reason is not a reason code")
	}
	if s.ReleaseVersion < 0 || s.Sequence < 0 {
		return errors.New("releaseVersion or sequence is negative")
	}
	if s.LoadedAt != "" {
		if _, err := time.Parse(time.RFC3339Nano, s.LoadedAt); err != nil {
			return errors.New("loadedAt is not RFC 3339")
		}
	}
	return nil
}
