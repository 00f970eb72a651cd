package configserver

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

// Verifier checks a raw bearer token; *auth.Verifier implements it.
type Verifier interface {
	Verify(raw string) (*auth.Claims, error)
}

// keyTruster is a Verifier that can say whether the key that verified a
// token is still trusted (*auth.Verifier): a held request is answered only
// under a key still in the set.
type keyTruster interface {
	Trusts(keyID string) bool
}

// stillTrusted refuses claims whose verifying key has left the key set
// since they were verified (a key removed from the JWKS while a request
// was held). A Verifier that cannot tell passes everything.
func (h *handler) stillTrusted(c *auth.Claims) *httpError {
	kt, ok := h.verifier.(keyTruster)
	if !ok || c == nil || kt.Trusts(c.KeyID) {
		return nil
	}
	return errUnauthorized(errors.New("the token's key was removed from the trusted keys while the request was held"))
}

// Options configures NewHandler. The zero value is valid but refuses every
// request that needs a token (no Verifier: fail closed).
type Options struct {
	// Verifier checks bearer tokens. Nil: every /configs request gets 401.
	Verifier Verifier
	// Logger receives one access-log record per request (identity, snapshot
	// id, status, size, duration; never a token or a body). Nil: discard.
	Logger *slog.Logger
	// AccessLog says which requests get an access-log record: every one
	// (AccessLogAll, the zero value), those answered 4xx or 5xx
	// (AccessLogFailures), or none (AccessLogNone). /metrics counts every
	// request whatever it says.
	AccessLog AccessLogMode
	// Registry receives the server's Prometheus collectors and is served at
	// /metrics. Nil: a private registry.
	Registry *prometheus.Registry
	// StoreTimeout bounds each store call. Default 2 s.
	StoreTimeout time.Duration
	// RetryAfter is sent with 503 answers. Default 5 s (rounded to seconds).
	RetryAfter time.Duration
	// MaxEvidenceBytes bounds POST /configs/evidence bodies. Default 16 KiB.
	MaxEvidenceBytes int64
	// EvidencePerMinute and EvidenceBurst rate-limit evidence reports per
	// identity (token bucket; 429 with Retry-After beyond). Defaults
	// DefaultEvidencePerMinute and DefaultEvidenceBurst.
	EvidencePerMinute, EvidenceBurst int
	// Clock tells the time for evidence checks (observedAt bounds, rate
	// limit) and whether a current pointer's lease has ended (503
	// lease_ended), and, when set, for every answer's Date header (which a runtime
	// measures its clock's skew against), so that a server on a simulated
	// clock says the time it runs by. Nil: time.Now (and net/http's Date).
	Clock func() time.Time
	// RequireCertBinding makes every token carry cnf["x5t#S256"] equal to
	// the SHA-256 of the TLS client certificate (RFC 8705). Independently of
	// it, a token that carries a binding is always checked against the
	// presented certificate.
	RequireCertBinding bool
	// MaxWait bounds how long GET /configs?wait= holds a request (a longer
	// wait is lowered to it; X-Config-Watch-Max announces it). Waiting needs
	// a Store that implements Notifier; otherwise wait= is ignored. Default
	// DefaultMaxWait (5 minutes).
	MaxWait time.Duration
	// MaxWatchesPerIdentity bounds the requests one identity may have held
	// at once (a runtime holds one; a runtime with a sidecar two): one
	// more is answered 429 at once, so that a single token cannot hold
	// every connection the server can accept. Default
	// DefaultMaxWatchesPerIdentity.
	MaxWatchesPerIdentity int
	// WatchAnswered, when set, is called after the answer of each parked
	// watch request is written, with its status and the time the write
	// ended (server-side watch latency measurements). It must be quick.
	WatchAnswered func(status int, written time.Time)
}

type handler struct {
	store            Store
	verifier         Verifier
	log              *slog.Logger
	accessLogMode    AccessLogMode
	metrics          *metrics
	metricsHandler   http.Handler
	storeTimeout     time.Duration
	retryAfter       int
	maxEvidenceBytes int64
	requireBinding   bool
	evidenceLimit    *rateLimiter
	now              func() time.Time
	date             func() time.Time // Options.Clock when one was set: the Date of every answer

	notifier    Notifier // nil: wait= is ignored
	maxWait     time.Duration
	watchMax    []string // the X-Config-Watch-Max value
	stopWatches chan struct{}
	stopOnce    sync.Once
	parkedMu    sync.Mutex
	parkedSet   map[*parked]struct{}
	holding     map[bundle.Identity]int // held requests per identity (under parkedMu)
	parkedBy    map[bundle.Identity][]*parked
	// unanswered counts parked requests not yet answered and closed
	// (under parkedMu): Serve waits for them at shutdown.
	unanswered int
	maxHolding int
	wakes      wakeQueue // parked requests woken by a change, being answered

	watchAnswered func(status int, written time.Time)
}

// NewHandler returns the Config Server's HTTP handler over store.
func NewHandler(store Store, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = 2 * time.Second
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 5 * time.Second
	}
	if opts.MaxEvidenceBytes <= 0 {
		opts.MaxEvidenceBytes = bundle.MaxEvidenceBytes
	}
	if opts.EvidencePerMinute <= 0 {
		opts.EvidencePerMinute = DefaultEvidencePerMinute
	}
	if opts.EvidenceBurst <= 0 {
		opts.EvidenceBurst = DefaultEvidenceBurst
	}
	var date func() time.Time // the Date of every answer; nil: net/http's (the wall clock)
	if opts.Clock == nil {
		opts.Clock = time.Now
	} else {
		date = opts.Clock
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	h := &handler{
		store:            store,
		verifier:         opts.Verifier,
		log:              opts.Logger,
		accessLogMode:    opts.AccessLog,
		storeTimeout:     opts.StoreTimeout,
		retryAfter:       max(int(opts.RetryAfter.Round(time.Second)/time.Second), 1),
		maxEvidenceBytes: opts.MaxEvidenceBytes,
		requireBinding:   opts.RequireCertBinding,
		evidenceLimit:    newRateLimiter(opts.EvidencePerMinute, opts.EvidenceBurst),
		now:              opts.Clock,
		date:             date,
		maxWait:          opts.MaxWait,
		watchMax:         []string{strconv.FormatInt(int64(opts.MaxWait/time.Second), 10)},
		stopWatches:      make(chan struct{}),
		parkedSet:        make(map[*parked]struct{}),
		holding:          make(map[bundle.Identity]int),
		parkedBy:         make(map[bundle.Identity][]*parked),
		maxHolding:       cmp.Or(opts.MaxWatchesPerIdentity, DefaultMaxWatchesPerIdentity),
		watchAnswered:    opts.WatchAnswered,
	}
	h.notifier, _ = store.(Notifier)
	h.metrics = newMetrics(opts.Registry, store, opts.Verifier)
	h.metricsHandler = metricsHandler(opts.Registry)
	return h
}

// Routes.
const (
	routeConfigs  = "configs"
	routeWatch    = "watch"
	routeSnapshot = "snapshot"
	routeEvidence = "evidence"
	routeHealthz  = "healthz"
	routeReadyz   = "readyz"
	routeMetrics  = "metrics"
	routeOther    = "other"
)

const snapshotPrefix = "/configs/snapshots/"

func allowFor(route string) string {
	switch route {
	case routeEvidence:
		return "POST"
	default:
		return "GET, HEAD"
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	st := &requestState{reqLog: reqLog{method: r.Method, start: start}, statusWriter: statusWriter{ResponseWriter: w, date: h.date}}
	rl, sw := &st.reqLog, &st.statusWriter
	path := r.URL.Path
	var err *httpError
	switch {
	case path == "/configs":
		rl.route = routeConfigs
		err = h.serveCurrent(sw, r, rl)
	case strings.HasPrefix(path, snapshotPrefix):
		rl.route = routeSnapshot
		err = h.serveSnapshot(sw, r, rl, path[len(snapshotPrefix):])
	case path == "/configs/evidence":
		rl.route = routeEvidence
		err = h.serveEvidence(sw, r, rl)
	case path == "/healthz":
		rl.route = routeHealthz
		err = h.serveHealthz(sw, r)
	case path == "/readyz":
		rl.route = routeReadyz
		err = h.serveReadyz(sw, r, rl)
	case path == "/metrics":
		rl.route = routeMetrics
		if err = readOnly(r); err == nil {
			h.metricsHandler.ServeHTTP(sw, r)
		}
	default:
		rl.route = routeOther
		err = &httpError{status: http.StatusNotFound, code: "not_found", message: "no such endpoint", reason: "no such endpoint"}
	}
	if rl.parked {
		return // a held watch: its answer is written and logged when it ends
	}
	if err != nil {
		h.writeError(sw, rl, err)
	}
	h.finishRequest(r, rl, sw)
}

// finishRequest records the metrics and the access log of a request.
func (h *handler) finishRequest(r *http.Request, rl *reqLog, sw *statusWriter) {
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	d := time.Since(rl.start)
	h.metrics.observe(rl.route, status, d)
	h.accessLog(r, rl, status, sw.size, d)
}

// readOnly accepts GET and HEAD without a request body.
func readOnly(r *http.Request) *httpError {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return errMethod("GET, HEAD")
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return errBadRequest("request body not accepted")
	}
	return nil
}

// authenticate verifies the bearer token and any client-certificate binding.
func (h *handler) authenticate(r *http.Request, rl *reqLog) (*auth.Claims, *httpError) {
	if h.verifier == nil {
		return nil, errUnauthorized(errors.New("no token verifier configured"))
	}
	raw, ok := bearer(r.Header["Authorization"])
	if !ok {
		return nil, errUnauthorized(errors.New("missing or malformed Authorization header"))
	}
	c, err := h.verifier.Verify(raw)
	if err != nil {
		return nil, errUnauthorized(err)
	}
	rl.claims = c
	if c.CertThumbprint != "" || h.requireBinding {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return nil, errUnauthorized(errors.New("token requires a client certificate"))
		}
		sum := sha256.Sum256(r.TLS.PeerCertificates[0].Raw)
		if c.CertThumbprint != base64.RawURLEncoding.EncodeToString(sum[:]) {
			return nil, errUnauthorized(errors.New("token is not bound to the client certificate"))
		}
	}
	return c, nil
}

// bearer extracts the token of a single "Bearer" Authorization header.
func bearer(values []string) (string, bool) {
	if len(values) != 1 {
		return "", false
	}
	v := values[0]
	const prefix = "bearer "
	if len(v) <= len(prefix) || !strings.EqualFold(v[:len(prefix)], prefix) {
		return "", false
	}
	return strings.TrimSpace(v[len(prefix):]), true
}

func (h *handler) storeContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), h.storeTimeout)
}

func (h *handler) serveHealthz(w http.ResponseWriter, r *http.Request) *httpError {
	if err := readOnly(r); err != nil {
		return err
	}
	writeJSONStatus(w, http.StatusOK, `{"status":"ok"}`)
	return nil
}

func (h *handler) serveReadyz(w http.ResponseWriter, r *http.Request, rl *reqLog) *httpError {
	if err := readOnly(r); err != nil {
		return err
	}
	ctx, cancel := h.storeContext(r)
	defer cancel()
	if err := h.store.Ready(ctx); err != nil {
		rl.err = err
		rl.reason = "not ready"
		w.Header()["Retry-After"] = []string{itoa(h.retryAfter)}
		// The reason says why (no live database connection, no configpub
		// schema in the database, pointers not confirmed for how long, a
		// standby lagging): a probe by hand reads it without the server's
		// logs.
		reason, _ := json.Marshal(err.Error())
		writeJSONStatus(w, http.StatusServiceUnavailable, `{"status":"not ready","reason":`+string(reason)+`}`)
		return nil
	}
	writeJSONStatus(w, http.StatusOK, `{"status":"ready"}`)
	return nil
}

func writeJSONStatus(w http.ResponseWriter, status int, body string) {
	hdr := w.Header()
	hdr["Content-Type"] = []string{"application/json"}
	hdr["Cache-Control"] = []string{"no-store"}
	hdr["Content-Length"] = []string{itoa(len(body) + 1)}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body + "\n"))
}
