// Command runtime is a minimal runtime that embeds the configpub client
// library: it polls the Config Server, verifies every snapshot and prints one
// evidence line per load, and serves its own health from the current
// (verified, unexpired) snapshot. It exists to show the wiring and to measure
// what embedding the client costs (binary size, dependencies); see README.md
// "Runtime dependency budget".
//
//	go run ./examples/runtime -server https://configs.example -token-file /var/run/token \
//	  -host payments.example -service-id agent-42 -env-tag prod -audience agent \
//	  -trust-key cosign.pub -cache-dir /var/cache/configpub
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "runtime:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		opts     client.Options
		tokFile  string
		trustKey string
		interval time.Duration
	)
	flag.StringVar(&opts.ServerURL, "server", "", "Config Server base URL")
	flag.StringVar(&tokFile, "token-file", "", "file holding the bearer JWT")
	flag.StringVar(&opts.Identity.Host, "host", "", "runtime host")
	flag.StringVar(&opts.Identity.ServiceID, "service-id", "", "runtime serviceId")
	flag.StringVar(&opts.Identity.EnvTag, "env-tag", "", "runtime envTag")
	flag.StringVar(&opts.Audience, "audience", bundle.AudienceAgent, "agent, gateway or knowledge")
	flag.StringVar(&trustKey, "trust-key", "cosign.pub", "cosign.pub with the trusted manifest key(s)")
	flag.StringVar(&opts.CacheDir, "cache-dir", "", "directory for the last-known-good file")
	flag.DurationVar(&opts.Skew, "skew", 30*time.Second, "clock-skew tolerance")
	flag.DurationVar(&interval, "interval", time.Minute, "polling interval")
	flag.Parse()

	pem, err := os.ReadFile(trustKey)
	if err != nil {
		return fmt.Errorf("read trust key: %w", err)
	}
	if opts.TrustedKeys, err = client.ParseTrustedKeys(pem); err != nil {
		return fmt.Errorf("%s: %w", trustKey, err)
	}
	if tokFile != "" {
		opts.TokenSource = client.TokenFile(tokFile)
	}
	c, err := client.New(opts)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := c.Restore(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "runtime: no last-known-good:", err)
	}
	enc := json.NewEncoder(os.Stdout)
	err = c.Watch(ctx, interval, func(ev *client.Evidence, _ error) {
		_ = enc.Encode(ev)
		if snap, err := c.Current(); err == nil {
			fmt.Fprintf(os.Stderr, "runtime: serving release %d (%s)\n", snap.Envelope.ReleaseVersion, snap.SnapshotID)
		}
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
