package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/promoter"
)

func addLeaseCmd(root *cobra.Command) {
	lease := &cobra.Command{
		Use:   "lease",
		Short: "Manage delivery-manifest leases",
		Args:  cobra.NoArgs,
	}
	var (
		sf     storeFlags
		rf     registryFlags
		env    string
		every  time.Duration
		attach bool
		// attachPrefix is --registry: where --attach attaches.
		attachPrefix string
	)
	renew := &cobra.Command{
		Use:   "renew --env ENV --key cosign.key [--interval D]",
		Short: "Re-sign fresh leases for every current pointer (same sequence, later issuedAt)",
		Long: `renew re-signs, for every current pointer of ENV, its delivery manifest with a
new issuedAt and the pointer's rolling lease window, keeping snapshot and
sequence, in one transaction, and notifies the Config Servers. Revoked snapshots
are skipped so their leases run out. With --interval it repeats at that interval
until interrupted; once it has renewed, a renewal that fails (the database
restarting or failing over, the registry unreachable) is reported on stderr and
tried again after 5s, doubling up to the interval, instead of ending the process
and leaving every lease to run out; the first renewal's error ends it, as without
--interval. Before each renewal it reads --key again: a rotated key (with the same
COSIGN_PASSWORD) signs from then on. With --attach, each renewal also attaches
the renewed manifests to their artifacts in the registry as OCI referrers (as
` + "`configpub registry attach`" + `), so runtimes that pull from the registry keep
a current lease.

The lease is the short delivery lease (minutes), renewed for as long as a
snapshot stays current. The activation window of a snapshot (weeks: how long a
pointer may be moved to it) is renewed by a new release instead:
configpub compile --renew.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < 0 {
				return usageError{errors.New("--interval must not be negative")}
			}
			if attachPrefix != "" && !attach {
				return usageError{errors.New("--registry is where --attach attaches: give --attach too")}
			}
			ctx := cmd.Context()
			key := followKey(sf.key, "lease renew "+env)
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			renewed := false // a renewer that never renewed exits on its error
			failures := 0
			for {
				if every > 0 {
					store = key.follow(store, cmd.ErrOrStderr())
				}
				wait := every
				res, msg, err := renewOnce(ctx, store, env, attach, attachPrefix, &rf)
				switch {
				case err == nil:
					renewed, failures = true, 0
					if err := report(cmd, res, func(w io.Writer) error { _, err := fmt.Fprintln(w, msg); return err }); err != nil {
						return err
					}
				case every > 0 && ctx.Err() != nil:
					return nil // interrupted: a clean stop (the renewal in flight rolled back)
				case every == 0 || !renewed:
					return storeError(err, env)
				default:
					// Once running, a failure (the database restarted or failed
					// over, the registry unreachable) is reported and retried:
					// a renewer that exits leaves every lease to run out.
					failures++
					wait = retryAfter(failures, every)
					fmt.Fprintf(cmd.ErrOrStderr(), "lease renew %s: renewal failed (%d in a row): %v; next attempt in %s\n",
						env, failures, err, wait)
				}
				if every == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
		},
	}
	sf.add(renew, true)
	outputFlag(renew)
	renew.Flags().StringVar(&env, "env", "", "environment tag (required)")
	renew.Flags().DurationVar(&every, "every", 0, "repeat at this interval until interrupted (0 = once)")
	renew.Flags().BoolVar(&attach, "attach", false, "also attach the renewed manifests to their artifacts as OCI referrers (registry credentials from the Docker config)")
	renew.Flags().StringVar(&attachPrefix, "registry", "", "with --attach: attach under this registry prefix instead of where each snapshot was first published (as registry attach --registry)")
	rf.add(renew)
	_ = renew.MarkFlagRequired("env")
	lease.AddCommand(renew)
	root.AddCommand(lease)
}

// renewOnce renews env's leases and, with attach, attaches the renewed
// manifests; it returns the result and its one-line summary.
func renewOnce(ctx context.Context, store *promoter.Store, env string, attach bool, prefix string, rf *registryFlags) (*promoter.RenewResult, string, error) {
	res, err := store.RenewLeases(ctx, env)
	if err != nil {
		return nil, "", err
	}
	msg := fmt.Sprintf("%s: renewed %d leases at %s", env, res.Renewed, res.At.Format(time.RFC3339))
	if res.SkippedCount > 0 {
		msg += fmt.Sprintf(" (%d skipped: revoked or no lease window)", res.SkippedCount)
	}
	if attach {
		rc, err := rf.client()
		if err != nil {
			return nil, "", err
		}
		ar, err := store.AttachDeliveryManifestsAt(ctx, env, rc, prefix)
		if err != nil {
			return nil, "", fmt.Errorf("renewed %d leases, attach: %w", res.Renewed, err)
		}
		msg += fmt.Sprintf("; attached %d delivery manifests", ar.AttachedCount) + pruneSummary(ar)
	}
	return res, msg, nil
}

// retryAfter is the wait before the next attempt after failures renewals
// failed in a row: 5 s, doubling, never more than the interval.
func retryAfter(failures int, interval time.Duration) time.Duration {
	d := 5 * time.Second
	for i := 1; i < failures && d < interval; i++ {
		d *= 2
	}
	return min(d, interval)
}
