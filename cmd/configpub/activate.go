package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/promoter"
)

func addActivateCmd(root *cobra.Command) {
	var f moveFlags
	cmd := &cobra.Command{
		Use:   "activate --env ENV --release N --reason TEXT --actor NAME --key cosign.key",
		Short: "Move every pointer of an environment forward to the snapshots of a newer recorded release",
		Long: `activate is the forward counterpart of rollback: it restores exactly the target
mapping of release N (newer than the active release, already recorded by promote),
in one transaction: every target of release N is pointed at its snapshot and every
identity it does not contain is retired, signing a delivery manifest per moved
target. It is the explicit way back to a rolled-back release (re-running its
promote never re-activates it). Refused with nothing moved (exit 1) like rollback.
Exit 3: outcome unknown, re-run with the printed --command-id or run reconcile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, closeFn, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := store.Activate(cmd.Context(), promoter.MoveInput{
				CommandID: f.id(), EnvTag: f.env, Release: f.release, Actor: f.actor, Reason: f.reason,
			})
			if err != nil {
				return storeError(fmt.Errorf("%w (command %s)", err, f.commandID), f.env)
			}
			return printActivation(cmd.OutOrStdout(), res)
		},
	}
	f.add(cmd, "release", "recorded release to activate")
	root.AddCommand(cmd)
}
