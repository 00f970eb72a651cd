package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/webhook"
)

// Webhook configuration of the verbs that change releases (never flags, so
// that receiver URLs and the secret stay out of shell history).
const (
	webhookURLsEnv    = "CONFIGPUB_WEBHOOK_URLS"    // comma-separated receiver URLs
	webhookSecretEnv  = "CONFIGPUB_WEBHOOK_SECRET"  // HMAC-SHA256 key
	webhookTimeoutEnv = "CONFIGPUB_WEBHOOK_TIMEOUT" // per attempt; also how long a verb waits for deliveries at exit
)

// notifierFromEnv returns the webhook notifier configured in the
// environment (nil when no receiver is configured) and the function that
// waits, at most the attempt timeout, for its deliveries.
func notifierFromEnv(pool *pgxpool.Pool) (promoter.Notifier, func(), error) {
	n, timeout, err := webhookFromEnv(pool)
	if n == nil || err != nil {
		return nil, func() {}, err
	}
	return n, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = n.Close(ctx)
	}, nil
}

// webhookFromEnv returns the webhook notifier configured in the
// environment, logging to pool (nil when no receiver is configured), and
// its attempt timeout.
func webhookFromEnv(pool *pgxpool.Pool) (*webhook.Notifier, time.Duration, error) {
	raw := strings.TrimSpace(os.Getenv(webhookURLsEnv))
	if raw == "" {
		return nil, 0, nil
	}
	secret := os.Getenv(webhookSecretEnv)
	if secret == "" {
		return nil, 0, usageError{errors.New(webhookURLsEnv + " is set but " + webhookSecretEnv + " is empty")}
	}
	timeout := 5 * time.Second
	if v := os.Getenv(webhookTimeoutEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, 0, usageError{fmt.Errorf("%s=%q: want a positive duration such as 5s", webhookTimeoutEnv, v)}
		}
		timeout = d
	}
	var urls []string
	for _, u := range strings.Split(raw, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	n, err := webhook.New(webhook.Options{URLs: urls, Secret: []byte(secret), Timeout: timeout, Log: webhook.PGLog{Pool: pool}})
	if err != nil {
		return nil, 0, usageError{fmt.Errorf("%s: %w", webhookURLsEnv, err)}
	}
	return n, timeout, nil
}

func addWebhookCmd(root *cobra.Command) {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Deliver release notifications that webhook receivers missed",
	}
	var (
		sf            storeFlags
		since, minAge time.Duration
	)
	redeliver := &cobra.Command{
		Use:   "redeliver [--since 168h] [--min-age 2m]",
		Short: "Send each webhook receiver the recorded events it has not accepted",
		Long: `redeliver sends each receiver of ` + webhookURLsEnv + ` (signed with
` + webhookSecretEnv + `, as the verbs that change releases send them) the events
recorded in the last --since that were sent to it, or to no receiver at all (the
process that recorded one stopped before its first attempt), or to other receivers
while it was in use (it has attempts from before and after the event: the process
stopped between their attempts and its own; a receiver configured later is not sent
what the others were sent before it), and that it has not
accepted and did not refuse for
good (a 4xx other than 408 and 429), oldest first, with the same event id
(X-Configpub-Delivery), which receivers deduplicate on. A verb that changes a
release waits only ` + webhookTimeoutEnv + ` (5s) for its deliveries before it
exits, so a receiver that was down then misses the event; every event is
recorded (configpub.webhook_event) in the transaction of the state change it
reports, before any attempt. Events recorded in
the last --min-age are left to the deliveries that may still be retrying them.
A receiver that still fails an event after the retries keeps the rest for a
later run. Exits 1 when any event is still undelivered. Run it on a schedule,
for example every 10 minutes, as the promoter's database user.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if since <= 0 {
				return usageError{fmt.Errorf("--since must be positive, got %s", since)}
			}
			if minAge < 0 {
				return usageError{fmt.Errorf("--min-age must not be negative, got %s", minAge)}
			}
			u, err := sf.url()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			pool, err := pgsession.NewPool(ctx, u)
			if err != nil {
				return fmt.Errorf("--database: %w", err)
			}
			defer pool.Close()
			n, _, err := webhookFromEnv(pool)
			if err != nil {
				return err
			}
			if n == nil {
				return usageError{errors.New(webhookURLsEnv + " is not set: no receiver to deliver to")}
			}
			now := time.Now().UTC()
			res, err := n.Redeliver(ctx, webhook.PGLog{Pool: pool}, now.Add(-since), now.Add(-minAge))
			if err != nil {
				return err
			}
			if err := report(cmd, res, func(w io.Writer) error {
				for _, r := range res.Receivers {
					if _, err := fmt.Fprintf(w, "%s: %d undelivered event(s), %d delivered now, %d still undelivered\n",
						r.Receiver, r.Pending, r.Delivered, r.Undelivered); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
			if res.Undelivered > 0 {
				return fmt.Errorf("%d event(s) still undelivered; run again later", res.Undelivered)
			}
			return nil
		},
	}
	sf.add(redeliver, false)
	redeliver.Flags().DurationVar(&since, "since", webhook.RedeliverWindow, "redeliver events recorded within this long (what the receivers must remember event ids for)")
	redeliver.Flags().DurationVar(&minAge, "min-age", webhook.RedeliverMinAge, "leave events recorded within this long to their first delivery")
	outputFlag(redeliver)
	cmd.AddCommand(redeliver)
	root.AddCommand(cmd)
}
