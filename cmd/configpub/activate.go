package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/textlist"
	"github.com/configpub/configpub/promoter"
)

func addActivateCmd(root *cobra.Command) {
	var (
		f          moveFlags
		timeout    time.Duration
		breakGlass bool
	)
	cmd := &cobra.Command{
		Use:   "activate --env ENV --release N --reason TEXT --actor NAME --key cosign.key",
		Short: "Move every pointer of an environment forward to the snapshots of a newer recorded release",
		Long: `activate is the forward counterpart of rollback: it restores exactly the target
mapping of release N (newer than the active release, already recorded by promote,
or an older one that was never active: STAGED, or RECORDED by a promote that caught
it up, which rollback refuses), in one transaction: every target of release N is
pointed at its snapshot and every
identity it does not contain is retired, signing a delivery manifest per moved
target. It is the explicit way back to a rolled-back release (re-running its
promote never re-activates it), and the way to activate a STAGED release
(promote --stage). Refused with nothing moved (exit 1) like rollback, and inside
a freeze window of the environment — of the release's rollout policy or of the
active release's — unless --break-glass (the reason is journaled).

In an environment with two-phase activation (the release's policy or the active
release's), activate of a STAGED release first waits (at most --timeout,
printing progress to stderr) until every target whose pointer moves has a READY
receipt for exactly its candidate snapshot, then moves every pointer in one
transaction. A RECORDED release (caught up by promote) is staged first — its
candidates served, the release STAGED — and then waited for the same way; a
timeout leaves it STAGED. A REJECTED candidate marks the release FAILED (exit 1, nothing
moved); a timeout exits 1 naming the identities not READY.
Exit 3: outcome unknown, re-run with the printed --command-id or run reconcile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if timeout <= 0 { // the store reads it as its default, 5m
				return usageError{fmt.Errorf("--timeout %s: must be positive", timeout)}
			}
			store, closeFn, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			errw := cmd.ErrOrStderr()
			res, err := store.ActivateRelease(cmd.Context(), promoter.MoveInput{
				CommandID: f.id(), EnvTag: f.env, Release: f.release, Actor: f.actor, Reason: f.reason,
			}, promoter.ActivateOptions{BreakGlass: breakGlass, Timeout: timeout, Progress: func(p promoter.ReadinessProgress) {
				printReadiness(errw, p)
			}})
			if err != nil {
				return storeError(f.failed(err), f.env)
			}
			return report(cmd, res, func(w io.Writer) error { return printActivation(w, res) })
		},
	}
	f.add(cmd, "release", "recorded release to activate")
	outputFlag(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "two-phase activation: how long to wait for every candidate to be READY")
	cmd.Flags().BoolVar(&breakGlass, "break-glass", false, "activate inside a freeze window (--reason is journaled)")
	root.AddCommand(cmd)
}

// printReadiness prints one progress line of a two-phase activation.
func printReadiness(w io.Writer, p promoter.ReadinessProgress) {
	waiting := ""
	if n := len(p.Waiting); n > 0 {
		waiting = "; waiting for " + textlist.Join(p.Waiting, n, 5)
	}
	fmt.Fprintf(w, "two-phase: %d/%d candidates READY after %s%s\n", p.Ready, p.Required, p.Elapsed.Round(time.Second), waiting)
}
