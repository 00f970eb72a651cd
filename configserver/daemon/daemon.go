package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/configserver/tlsfiles"
)

// Config describes one Config Server process. DatabaseURL, JWKS, Issuer and
// Audience are required; the rest have documented defaults.
type Config struct {
	// DatabaseURL connects as a member of configpub_server.
	DatabaseURL string
	// EvidenceDatabaseURL, when set, is where runtime evidence is inserted
	// (also as a configpub_server member): the primary, for a server whose
	// DatabaseURL is a hot standby, which takes no writes.
	EvidenceDatabaseURL string
	// Listen is the TCP address. Default ":8080". Ignored when Listener is set.
	Listen string
	// Listener, when set, is served instead of listening on Listen.
	Listener net.Listener
	// JWKS is a key file (JWKS JSON or PEM public keys) or an http(s) URL of
	// a JWKS, read again every JWKSRefresh.
	JWKS        string
	JWKSRefresh time.Duration // default 5 minutes
	Issuer      string
	Audience    string
	// Leeway for exp/nbf/iat. Default 30 s.
	Leeway time.Duration
	// TLSCert and TLSKey enable TLS; ClientCA additionally requires client
	// certificates (mTLS), and RequireCertBinding requires every token to be
	// bound to its certificate (cnf x5t#S256).
	// The three files are read again every TLSRefresh (default 1 minute), so
	// that renewed certificates are served without a restart.
	TLSCert, TLSKey, ClientCA string
	RequireCertBinding        bool
	TLSRefresh                time.Duration
	// Logger receives access logs and lifecycle events. Default: discard.
	Logger *slog.Logger
	// AccessLog selects the requests logged (default: every one).
	AccessLog configserver.AccessLogMode
	Store     pgstore.Options
	Server    configserver.ServerOptions
	// Ready, when set, is called with the bound address once serving.
	Ready func(addr net.Addr)
}

func (c *Config) validate() error {
	var missing []string
	for _, f := range []struct{ name, val string }{
		{"database URL", c.DatabaseURL}, {"jwks", c.JWKS}, {"issuer", c.Issuer}, {"audience", c.Audience},
	} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s required", ErrConfig, strings.Join(missing, ", "))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("%w: TLS needs both a certificate and a key", ErrConfig)
	}
	if c.ClientCA != "" && c.TLSCert == "" {
		return fmt.Errorf("%w: a client CA needs TLS (certificate and key)", ErrConfig)
	}
	if c.RequireCertBinding && c.ClientCA == "" {
		return fmt.Errorf("%w: certificate binding needs a client CA", ErrConfig)
	}
	return nil
}

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Listen == "" {
		cfg.Listen = ":8080"
	}
	var wg sync.WaitGroup
	defer wg.Wait() // runs last: every goroutine has seen cancel
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	keys, err := keySource(ctx, &cfg, &wg)
	if err != nil {
		return err
	}
	verifier, err := auth.NewVerifier(keys, auth.Options{Issuer: cfg.Issuer, Audience: cfg.Audience, Leeway: cfg.Leeway})
	if err != nil {
		return err
	}
	storeOpts := cfg.Store
	if storeOpts.Logger == nil {
		storeOpts.Logger = cfg.Logger
	}
	poolCfg, err := pgstore.PoolConfig(cfg.DatabaseURL, storeOpts)
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return fmt.Errorf("database pool: %w", err)
	}
	if cfg.EvidenceDatabaseURL != "" {
		evCfg, err := pgstore.PoolConfig(cfg.EvidenceDatabaseURL, storeOpts)
		if err != nil {
			pool.Close()
			return fmt.Errorf("evidence database: %w", err)
		}
		evPool, err := pgxpool.NewWithConfig(ctx, evCfg)
		if err != nil {
			pool.Close()
			return fmt.Errorf("evidence database pool: %w", err)
		}
		defer evPool.Close() // after the store has stopped (deferred below)
		storeOpts.EvidencePool = evPool
	}
	store, err := pgstore.New(pool, storeOpts)
	if err != nil {
		pool.Close()
		return err
	}
	// The store follows the database until the server has stopped, not
	// until ctx ends: the graceful shutdown answers the held watches and
	// drains the requests in flight from the pointers in memory, which a
	// store already stopped would refuse (503).
	storeCtx, stopStore := context.WithCancel(context.WithoutCancel(ctx))
	storeDone := make(chan struct{})
	go func() { defer close(storeDone); _ = store.Run(storeCtx) }()
	defer func() { stopStore(); <-storeDone; pool.Close() }()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerKeyMetrics(reg, keys)
	h := configserver.NewHandler(store, configserver.Options{
		Verifier: verifier, Logger: cfg.Logger, AccessLog: cfg.AccessLog, Registry: reg, RequireCertBinding: cfg.RequireCertBinding,
	})
	srvOpts := cfg.Server
	if srvOpts.Logger == nil {
		srvOpts.Logger = cfg.Logger
	}
	if cfg.TLSCert != "" {
		files, err := tlsfiles.Load(cfg.TLSCert, cfg.TLSKey, cfg.ClientCA, tlsfiles.Options{Interval: cfg.TLSRefresh, Logger: cfg.Logger})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = files.Run(ctx) }()
		srvOpts.TLSConfig = files.TLSConfig()
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "configpub_server_tls_certificate_expiry_timestamp_seconds",
			Help: "When the TLS certificate in use expires (Unix time); it moves when renewed files are read.",
		}, func() float64 { return float64(files.Certificate().NotAfter.Unix()) }))
	}
	ln := cfg.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
	}
	cfg.Logger.Info("config server listening", "addr", ln.Addr().String(), "tls", cfg.TLSCert != "", "mtls", cfg.ClientCA != "")
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	err = configserver.Serve(ctx, ln, h, srvOpts)
	cancel()
	return err
}

// keySource loads the token keys, a file or a URL, now, and reads them again
// in the background until ctx ends.
func keySource(ctx context.Context, cfg *Config, wg *sync.WaitGroup) (auth.KeySource, error) {
	return auth.OpenKeys(ctx, cfg.JWKS, auth.RemoteOptions{Interval: cfg.JWKSRefresh, Logger: cfg.Logger}, wg)
}

// registerKeyMetrics puts the token keys' state on /metrics: how many are
// in use and, for a file or URL read again on a schedule, when that last
// succeeded and how often it failed (an alert on its age catches a JWKS
// that stopped refreshing long before a rotated key is needed).
func registerKeyMetrics(reg *prometheus.Registry, keys auth.KeySource) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "configpub_server_token_keys",
		Help: "Workload-token verification keys in use.",
	}, func() float64 { return float64(len(keys.KeySet().Keys)) }))
	rr, ok := keys.(auth.RefreshReporter)
	if !ok {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "configpub_server_token_keys_refresh_timestamp_seconds",
		Help: "When the --jwks file or URL was last read successfully (Unix time), changed or not.",
	}, func() float64 {
		last, _ := rr.RefreshStats()
		if last.IsZero() {
			return 0
		}
		return float64(last.UnixNano()) / 1e9
	}), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "configpub_server_token_keys_refresh_failures_total",
		Help: "Reads of the --jwks file or URL that failed (the keys in use were kept).",
	}, func() float64 { _, n := rr.RefreshStats(); return float64(n) }))
}
