package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/daemon"
	"github.com/configpub/configpub/configserver/pgstore"
)

func addServeCmd(root *cobra.Command) {
	var (
		cfg       daemon.Config
		accessLog string
	)
	cmd := &cobra.Command{
		Use:   "serve --database URL --listen ADDR --jwks FILE|URL --issuer ISS --audience AUD",
		Short: "Run the Config Server: serve current policy snapshots to authenticated workloads",
		Long: `Run the Config Server. It reads PostgreSQL as a member of the
configpub_server role, follows pointer moves by LISTEN/NOTIFY (on a hot
standby, where NOTIFY does not arrive, by reading what changed every
--follow-interval, 200ms unless set; while the standby lags its primary by
more than --max-replica-lag it answers 503 and is not ready; a standby takes
no writes, so runtime evidence goes to --evidence-database), and serves
GET|HEAD /configs, /configs/snapshots/{id}, POST /configs/evidence, /healthz,
/readyz and /metrics. Workload JWTs are verified against the keys in --jwks
(a JWKS or PEM file, or an https URL), read again every --jwks-refresh and,
at most every 30s, when a token names a key id the keys in use lack, and
the --tls-cert, --tls-key and --client-ca files are read again every
--tls-refresh: rotated keys and renewed certificates (a Kubernetes Secret or
ConfigMap updated in place) are used without a restart, and an update that
cannot be read keeps what is in use. Access logs go to stderr as JSON, one
line per request (--access-log failures or none for fewer: at 100,000
runtimes holding requests for a minute that is about 1,700 lines a second).
SIGINT/SIGTERM shut it down gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.DatabaseURL == "" {
				cfg.DatabaseURL = os.Getenv("CONFIGPUB_DATABASE_URL") // never shown in --help: it may hold a password
			}
			if cfg.EvidenceDatabaseURL == "" {
				cfg.EvidenceDatabaseURL = os.Getenv("CONFIGPUB_EVIDENCE_DATABASE_URL")
			}
			mode, err := configserver.ParseAccessLogMode(accessLog)
			if err != nil {
				return usageError{fmt.Errorf("--access-log: %w", err)}
			}
			cfg.AccessLog = mode
			// The daemon reads 0 or less as its default: a value given
			// must be one it runs with.
			for _, d := range []struct {
				flag string
				v    time.Duration
			}{{"--leeway", cfg.Leeway}, {"--jwks-refresh", cfg.JWKSRefresh}, {"--tls-refresh", cfg.TLSRefresh}} {
				if d.v <= 0 {
					return usageError{fmt.Errorf("%s %s: must be positive", d.flag, d.v)}
				}
			}
			if cfg.Store.FollowInterval < 0 {
				return usageError{fmt.Errorf("--follow-interval %s: must not be negative (0: automatic)", cfg.Store.FollowInterval)}
			}
			switch {
			case cfg.Store.MaxReplicaLag < 0:
				return usageError{fmt.Errorf("--max-replica-lag %s: must not be negative (0: never)", cfg.Store.MaxReplicaLag)}
			case cfg.Store.MaxReplicaLag == 0:
				cfg.Store.MaxReplicaLag = -1 // never
			}
			cfg.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			err = daemon.Run(cmd.Context(), cfg)
			if errors.Is(err, daemon.ErrConfig) {
				return usageError{err}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DatabaseURL, "database", "", "PostgreSQL URL of a configpub_server member (default $CONFIGPUB_DATABASE_URL)")
	f.StringVar(&cfg.EvidenceDatabaseURL, "evidence-database", "",
		"PostgreSQL URL (a configpub_server member) on the primary for runtime evidence, when --database is a hot standby (default $CONFIGPUB_EVIDENCE_DATABASE_URL)")
	f.StringVar(&cfg.Listen, "listen", ":8080", "address to listen on")
	f.DurationVar(&cfg.Store.FollowInterval, "follow-interval", 0,
		"read pointer changes every interval instead of LISTEN/NOTIFY (automatic, 200ms, on a hot standby)")
	f.DurationVar(&cfg.Store.MaxReplicaLag, "max-replica-lag", pgstore.DefaultMaxReplicaLag,
		"on a hot standby: answer 503 and fail /readyz while it has not replayed WAL received this long ago, or has had no WAL receiver this long (0: never)")
	f.StringVar(&cfg.JWKS, "jwks", "", "token verification keys: JWKS or PEM file, or http(s) JWKS URL (required)")
	f.DurationVar(&cfg.JWKSRefresh, "jwks-refresh", 5*time.Minute, "interval between reads of the --jwks file or URL")
	f.StringVar(&cfg.Issuer, "issuer", "", "required token issuer (iss) (required)")
	f.StringVar(&cfg.Audience, "audience", "", "required token audience (aud) (required)")
	f.StringVar(&accessLog, "access-log", "all", "requests logged to stderr: all, failures (answered 4xx or 5xx) or none; /metrics counts every request")
	f.DurationVar(&cfg.Leeway, "leeway", 30*time.Second, "clock-skew leeway for exp, nbf and iat")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate (PEM)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "TLS private key (PEM)")
	f.StringVar(&cfg.ClientCA, "client-ca", "", "CA bundle for client certificates: enables mTLS")
	f.DurationVar(&cfg.TLSRefresh, "tls-refresh", time.Minute, "interval between reads of the --tls-cert, --tls-key and --client-ca files")
	f.BoolVar(&cfg.RequireCertBinding, "require-cert-binding", false, "require tokens bound to the client certificate (cnf x5t#S256); needs --client-ca")
	for _, name := range []string{"jwks", "issuer", "audience"} {
		_ = cmd.MarkFlagRequired(name)
	}
	root.AddCommand(cmd)
}
