package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	raw := strings.TrimSpace(os.Getenv(webhookURLsEnv))
	if raw == "" {
		return nil, func() {}, nil
	}
	secret := os.Getenv(webhookSecretEnv)
	if secret == "" {
		return nil, nil, usageError{errors.New(webhookURLsEnv + " is set but " + webhookSecretEnv + " is empty")}
	}
	timeout := 5 * time.Second
	if v := os.Getenv(webhookTimeoutEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, nil, usageError{fmt.Errorf("%s=%q: want a positive duration such as 5s", webhookTimeoutEnv, v)}
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
		return nil, nil, usageError{fmt.Errorf("%s: %w", webhookURLsEnv, err)}
	}
	return n, func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_ = n.Close(ctx)
	}, nil
}
