package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
)

// DefaultMaxBodyBytes bounds a values.yml body when Options.MaxBodyBytes is 0:
// 1 MiB, two orders of magnitude above the largest compiled artifact.
const DefaultMaxBodyBytes = 1 << 20

// DefaultHTTPTimeout is the request timeout of the default HTTP client.
const DefaultHTTPTimeout = 30 * time.Second

// Clock tells the time. The system clock's readings carry Go's monotonic
// clock, which the client uses for lease deadlines so that stepping the wall
// clock back cannot extend a lease. Tests inject a fake.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// TokenSource returns the bearer token (a JWT) for the next request. It is
// called once per request so rotated tokens are picked up.
type TokenSource func(ctx context.Context) (string, error)

// TokenFile returns a TokenSource that reads the token from path on every
// call (Kubernetes projected tokens rotate in place); surrounding whitespace
// is trimmed. A file that does not exist or is empty is an error matching
// ErrTokenMissing (and, when absent, fs.ErrNotExist). The token is never
// logged.
func TokenFile(path string) TokenSource {
	return func(ctx context.Context) (string, error) {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read token file %s: %w: %w", path, ErrTokenMissing, err)
		}
		if err != nil {
			return "", fmt.Errorf("read token file %s: %w", path, err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("read token file %s: empty: %w", path, ErrTokenMissing)
		}
		return tok, nil
	}
}

// Options configures a Client. Identity, Audience and TrustedKeys are
// required; every other field has a documented default for its zero value.
type Options struct {
	// ServerURL is the Config Server's base URL (GET <ServerURL>/configs).
	// Required for Load and ReportEvidence; "" allows OCI-only use.
	ServerURL string
	// Identity is the runtime's (host, serviceId, envTag). Required.
	Identity bundle.Identity
	// Audience is "agent", "gateway" or "knowledge". Required.
	Audience string
	// TokenSource supplies the bearer token. nil sends no Authorization header.
	TokenSource TokenSource
	// TrustedKeys verify delivery-manifest signatures; X-Manifest-Key-Id
	// selects one. At least one is required: New refuses to start without.
	// ParseTrustedKeys reads them from a cosign.pub file.
	TrustedKeys []TrustedKey
	// CacheDir holds the last-known-good file (CachePath) and, apart from
	// it, the seen-state file (SeenPath): the highest (sequence, issuedAt)
	// and revocation epoch applied, per signing key. "" keeps both in memory
	// only, so a restart starts with nothing.
	CacheDir string
	// Skew is the clock-skew tolerance applied to both ends of every validity
	// window. 0 means none; negative values are an error.
	Skew time.Duration
	// Clock tells the time. nil means the system clock (monotonic-aware).
	Clock Clock
	// HTTPClient sends requests. nil means a client with DefaultHTTPTimeout.
	// The client uses a copy whose CheckRedirect refuses every redirect, so
	// that the bearer token is only ever sent to ServerURL: a 3xx answer to
	// any request (loads, evidence) is UNAVAILABLE with REDIRECT_REFUSED.
	HTTPClient *http.Client
	// MaxBodyBytes bounds the values.yml body; a longer one is rejected
	// (BODY_TOO_LARGE) without being parsed. 0 means DefaultMaxBodyBytes.
	// Whatever the bound, a body is read only after the delivery manifest's
	// signature verified, and parsed only after its digest equals the signed
	// one.
	MaxBodyBytes int64
	// Logger receives operational messages (identifiers and reasons only,
	// never bodies or tokens). nil discards them.
	Logger *slog.Logger
}

func (o Options) validate() error {
	if o.Identity.Host == "" || o.Identity.ServiceID == "" || o.Identity.EnvTag == "" {
		return fmt.Errorf("options: identity %q is incomplete: host, serviceId and envTag are required", o.Identity.String())
	}
	if bundle.Namespace(o.Audience) == "" {
		return fmt.Errorf("options: audience %q: want agent, gateway or knowledge", o.Audience)
	}
	if err := validateTrustedKeys(o.TrustedKeys); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	if o.Skew < 0 {
		return fmt.Errorf("options: skew %s is negative", o.Skew)
	}
	if o.MaxBodyBytes < 0 {
		return fmt.Errorf("options: max body bytes %d is negative", o.MaxBodyBytes)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	hc := http.Client{Timeout: DefaultHTTPTimeout}
	if o.HTTPClient != nil {
		hc = *o.HTTPClient
	}
	hc.CheckRedirect = refuseRedirect
	o.HTTPClient = &hc
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.ServerURL = strings.TrimRight(o.ServerURL, "/")
	o.TrustedKeys = append([]TrustedKey(nil), o.TrustedKeys...)
	return o
}

// errRedirect is what refuseRedirect returns.
var errRedirect = errors.New("redirect refused: the client follows no redirect")

// refuseRedirect is the CheckRedirect of every client: no request is sent
// to the location a 3xx names (with or without the token).
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w (to %s)", errRedirect, req.URL.Redacted())
}

// validateTrustedKeys refuses an empty set and a key whose id is not its own.
func validateTrustedKeys(keys []TrustedKey) error {
	if len(keys) == 0 {
		return ErrNoTrustedKey
	}
	for i, k := range keys {
		if k.Key == nil || k.ID == "" {
			return fmt.Errorf("trusted key %d is empty", i)
		}
		id, err := signing.KeyID(k.Key)
		if err != nil {
			return fmt.Errorf("trusted key %d: %w", i, err)
		}
		if id != k.ID {
			return fmt.Errorf("trusted key %d: id %s does not match its key (%s)", i, k.ID, id)
		}
	}
	return nil
}
