package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/internal/pgsession"
)

// ErrConfig marks a Config that cannot work (a usage error).
var ErrConfig = errors.New("invalid console configuration")

// Config is what `configpub console` runs: Serve's input.
type Config struct {
	DatabaseURL string
	// Listen is the address. Default "127.0.0.1:8090". A non-loopback
	// address needs JWKS or TrustedProxies.
	Listen string
	// JWKS, Issuer and Audience configure operator bearer tokens (a key file
	// or an http(s) JWKS URL, refreshed every 5 minutes).
	JWKS, Issuer, Audience string
	// ProxyHeader and TrustedProxies (addresses or CIDRs) configure a
	// trusted reverse proxy.
	ProxyHeader    string
	TrustedProxies []string
	// ShowValues, LeaseHorizon, PerTargetMetrics and RepositoryURL: see
	// Options.
	ShowValues       bool
	RepositoryURL    string
	LeaseHorizon     time.Duration
	PerTargetMetrics bool
	Logger           *slog.Logger
	// Ready, when set, is called with the console's URL once it listens.
	Ready func(url string)
}

func (c *Config) options() (Options, error) {
	o := Options{ShowValues: c.ShowValues, LeaseHorizon: c.LeaseHorizon, PerTargetMetrics: c.PerTargetMetrics, RepositoryURL: c.RepositoryURL,
		ProxyHeader: c.ProxyHeader, Logger: c.Logger}
	if c.DatabaseURL == "" {
		return o, fmt.Errorf("%w: a database URL is required", ErrConfig)
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8090"
	}
	if c.JWKS != "" && (c.Issuer == "" || c.Audience == "") {
		return o, fmt.Errorf("%w: operator tokens (--jwks) need --issuer and --audience", ErrConfig)
	}
	if (c.ProxyHeader == "") != (len(c.TrustedProxies) == 0) {
		return o, fmt.Errorf("%w: --proxy-header and --trusted-proxy go together", ErrConfig)
	}
	for _, p := range c.TrustedProxies {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return o, fmt.Errorf("%w: --trusted-proxy %q is not an address or CIDR", ErrConfig, p)
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		o.TrustedProxies = append(o.TrustedProxies, pfx)
	}
	if !IsLoopbackListen(c.Listen) && c.JWKS == "" && len(o.TrustedProxies) == 0 {
		return o, fmt.Errorf("%w: listening on %s (not loopback) needs --jwks or --trusted-proxy: the console never serves remote clients without credentials", ErrConfig, c.Listen)
	}
	return o, nil
}

// Serve runs the console until ctx ends.
func Serve(ctx context.Context, cfg Config) error {
	opts, err := cfg.options()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	if cfg.JWKS != "" {
		keys, err := auth.OpenKeys(ctx, cfg.JWKS, auth.RemoteOptions{Logger: cfg.Logger}, &wg)
		if err != nil {
			return fmt.Errorf("console: --jwks: %w", err)
		}
		v, err := auth.NewVerifier(keys, auth.Options{Issuer: cfg.Issuer, Audience: cfg.Audience, Operator: true})
		if err != nil {
			return fmt.Errorf("console: %w", err)
		}
		opts.Verifier = v
	}
	pool, err := pgsession.NewPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("console: --database: %w", err)
	}
	defer pool.Close()
	c, err := New(ctx, pool, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("console: listen: %w", err)
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	if cfg.Ready != nil {
		cfg.Ready("http://" + ln.Addr().String() + "/")
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("console: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx) // live-update streams end with ctx
	return nil
}
