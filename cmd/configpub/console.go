package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/console"
)

func addConsoleCmd(root *cobra.Command) {
	var cfg console.Config
	var proxies []string
	cmd := &cobra.Command{
		Use:   "console --database URL [--listen ADDR]",
		Short: "Run the read-only operator console: timeline, release diffs, target history, time travel",
		Long: `Run the operator console, a read-only web UI and JSON API over the release store.
Connect as a member of configpub_viewer (and of configpub_viewer_bytes with
--show-values). It listens on 127.0.0.1:8090 by default and serves loopback
clients without credentials; any other client needs a bearer JWT verified
against --jwks (--issuer, --audience, claim sub) or, from a --trusted-proxy
address, the user header named by --proxy-header. Pages update live (server-sent
events driven by PostgreSQL NOTIFY, new readback receipts and leases passing
their refresh point or end); /api/... has the same data as JSON and
/metrics the publication metrics. SIGINT/SIGTERM stop it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.DatabaseURL == "" {
				cfg.DatabaseURL = os.Getenv(databaseEnv)
			}
			// The console reads 0 or less as its default, 72h.
			if cfg.LeaseHorizon <= 0 {
				return usageError{fmt.Errorf("--lease-horizon %s: must be positive", cfg.LeaseHorizon)}
			}
			cfg.TrustedProxies = proxies
			cfg.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			cfg.Ready = func(url string) { fmt.Fprintf(cmd.OutOrStdout(), "console listening on %s\n", url) }
			err := console.Serve(cmd.Context(), cfg)
			if errors.Is(err, console.ErrConfig) {
				return usageError{err}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DatabaseURL, "database", "", "PostgreSQL URL of a configpub_viewer member (default $"+databaseEnv+")")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:8090", "address to listen on; a non-loopback address needs --jwks or --trusted-proxy")
	f.BoolVar(&cfg.ShowValues, "show-values", false, "diff releases by their stored values (the login must be a member of configpub_viewer_bytes)")
	f.StringVar(&cfg.RepositoryURL, "repository-url", "", "web address of the policy repository (https://github.com/org/policies): release pages link the reviewed commit and pull request")
	f.StringVar(&cfg.JWKS, "jwks", "", "operator token keys: JWKS or PEM file, or http(s) JWKS URL (read again every 5 minutes)")
	f.StringVar(&cfg.Issuer, "issuer", "", "required operator token issuer (with --jwks)")
	f.StringVar(&cfg.Audience, "audience", "", "required operator token audience (with --jwks)")
	f.StringVar(&cfg.ProxyHeader, "proxy-header", "", "header carrying the user a trusted reverse proxy authenticated (e.g. X-Forwarded-User)")
	f.StringSliceVar(&proxies, "trusted-proxy", nil, "address or CIDR of a reverse proxy allowed to set --proxy-header (repeatable)")
	f.DurationVar(&cfg.LeaseHorizon, "lease-horizon", 72*time.Hour, "a lease expiring within this counts as about to expire")
	f.BoolVar(&cfg.PerTargetMetrics, "per-target-metrics", false, "export configpub_target_current_release per target (one series per target)")
	root.AddCommand(cmd)
}
