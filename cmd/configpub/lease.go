package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
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
	)
	renew := &cobra.Command{
		Use:   "renew --env ENV --key cosign.key [--interval D]",
		Short: "Re-sign fresh leases for every current pointer (same sequence, later issuedAt)",
		Long: `renew re-signs, for every current pointer of ENV, its delivery manifest with a
new issuedAt and the pointer's rolling lease window, keeping snapshot and
sequence, in one transaction, and notifies the Config Servers. Revoked snapshots
are skipped so their leases run out. With --interval it repeats at that interval
until interrupted. With --attach, each renewal also attaches the renewed manifests
to their artifacts in the registry as OCI referrers (as ` + "`configpub registry attach`" + `),
so runtimes that pull from the registry keep a current lease.

The lease is the short delivery lease (minutes), renewed for as long as a
snapshot stays current. The activation window of a snapshot (weeks: how long a
pointer may be moved to it) is renewed by a new release instead:
configpub compile --renew.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < 0 {
				return usageError{errors.New("--interval must not be negative")}
			}
			ctx := cmd.Context()
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			for {
				res, err := store.RenewLeases(ctx, env)
				if err != nil {
					return storeError(err, env)
				}
				msg := fmt.Sprintf("%s: renewed %d leases at %s", env, res.Renewed, res.At.Format(time.RFC3339))
				if res.SkippedCount > 0 {
					msg += fmt.Sprintf(" (%d skipped: revoked or no lease window)", res.SkippedCount)
				}
				if attach {
					rc, err := rf.client()
					if err != nil {
						return err
					}
					ar, err := store.AttachDeliveryManifests(ctx, env, rc)
					if err != nil {
						return err
					}
					msg += fmt.Sprintf("; attached %d delivery manifests", ar.AttachedCount)
				}
				if err := report(cmd, res, func(w io.Writer) error { _, err := fmt.Fprintln(w, msg); return err }); err != nil {
					return err
				}
				if every == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	sf.add(renew, true)
	outputFlag(renew)
	renew.Flags().StringVar(&env, "env", "", "environment tag (required)")
	renew.Flags().DurationVar(&every, "every", 0, "repeat at this interval until interrupted (0 = once)")
	renew.Flags().BoolVar(&attach, "attach", false, "also attach the renewed manifests to their artifacts as OCI referrers (registry credentials from the Docker config)")
	rf.add(renew)
	_ = renew.MarkFlagRequired("env")
	lease.AddCommand(renew)
	root.AddCommand(lease)
}
