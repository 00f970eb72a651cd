package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/configpub/configpub/configserver/auth"
)

// TokenVerifier checks an operator's bearer token; *auth.Verifier built
// with Options.Operator satisfies it.
type TokenVerifier interface {
	Verify(raw string) (*auth.Claims, error)
}

// Options configure a Console. The zero value serves loopback clients only,
// shows no configuration values and keeps per-target metrics off.
type Options struct {
	// ShowValues diffs releases by their stored artifact bytes (changed
	// leaves only, secret references masked). The database login must be a
	// member of configpub_viewer_bytes. Default false: diffs compare digests.
	ShowValues bool
	// Verifier accepts bearer tokens from non-loopback clients. Default nil:
	// no bearer token is accepted.
	Verifier TokenVerifier
	// ProxyHeader names the header carrying the user a trusted reverse proxy
	// authenticated (for example X-Forwarded-User). It is honoured only from
	// TrustedProxies. Default "": none.
	ProxyHeader string
	// TrustedProxies are the peer addresses allowed to set ProxyHeader. A
	// request from one of them without the header is refused, loopback
	// included.
	TrustedProxies []netip.Prefix
	// LeaseHorizon: a lease past its refresh point, or expiring within
	// the horizon while it is longer than the horizon, counts as about to
	// expire (a lease shorter than the horizon always ends within it).
	// Default 72 hours.
	LeaseHorizon time.Duration
	// PerTargetMetrics exports configpub_target_current_release per target
	// (one series per target: mind the cardinality). Default false.
	PerTargetMetrics bool
	// CacheTTL bounds how long computed page data is reused; any change
	// notice (NOTIFY) drops it at once. Default 5 s; negative disables.
	CacheTTL time.Duration
	// RepositoryURL is the web address of the policy repository (for
	// example https://github.com/org/policies). When set, a release page
	// links its reviewed commit (<url>/commit/<hash>) and, when the release
	// was made from a pull request ref (refs/pull/N/head or /merge), the pull
	// request (<url>/pull/N). Default "": no links.
	RepositoryURL string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives access-refusal and live-update warnings. Default: discard.
	Logger *slog.Logger
	// Registry receives the console's collectors. Default: a new registry.
	Registry *prometheus.Registry
}

// Console serves the operator console over a configpub_viewer pool.
type Console struct {
	pool *pgxpool.Pool
	opts Options
	rd   *reader
	hub  *hub
	pc   *pageCache
	reg  *prometheus.Registry
	m    *httpMetrics
	tpl  *templates

	// wake tells followLeases that leases may have moved (a notification
	// arrived) or that a live client connected.
	wake chan struct{}
	// leaseCheck bounds how long followLeases waits between looks at the
	// clock; leaseSettle is how long it lets a burst of notifications
	// settle before it reads the leases again.
	leaseCheck, leaseSettle time.Duration
}

// New checks the schema the pool reaches and returns a Console. Call Run to
// follow NOTIFY for live updates and Handler to serve.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Console, error) {
	if pool == nil {
		return nil, errors.New("console: no database pool")
	}
	if opts.LeaseHorizon <= 0 {
		opts.LeaseHorizon = 72 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	repo, err := parseRepositoryURL(opts.RepositoryURL)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	f, err := loadFeatures(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if opts.ShowValues {
		// Checked now rather than found by every release page answering
		// 500: the value diffs read artifact bytes.
		var can bool
		if err := pool.QueryRow(ctx, `SELECT has_column_privilege('configpub.artifact', 'bytes', 'SELECT')`).Scan(&can); err != nil {
			return nil, fmt.Errorf("console: check the artifact bytes privilege: %w", err)
		}
		if !can {
			return nil, fmt.Errorf("console: --show-values reads artifact bytes, which this login may not: make it a member of configpub_viewer_bytes (GRANT configpub_viewer_bytes TO <login>), or run without --show-values (diffs by digest)")
		}
	}
	tpl, err := parseTemplates()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{
		pool: pool,
		opts: opts,
		rd: &reader{q: pool, f: f, now: opts.Now, leaseHorizon: opts.LeaseHorizon, journalListed: journalListed,
			showValues: opts.ShowValues, repository: repo},
		hub: newHub(),
		pc:  newPageCache(opts.CacheTTL, opts.Now),
		reg: opts.Registry,
		tpl: tpl,

		wake:        make(chan struct{}, 1),
		leaseCheck:  time.Minute,
		leaseSettle: time.Second,
	}
	c.hub.onSubscribe = c.poke
	c.m = newHTTPMetrics(c.reg, c.hub)
	c.reg.MustRegister(&publicationCollector{rd: c.rd, perTarget: opts.PerTargetMetrics, logger: opts.Logger})
	return c, nil
}
