package main

import (
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/promoter"
)

// moveFlags are the flags of rollback and activate.
type moveFlags struct {
	storeFlags
	env, actor, reason, commandID string
	release                       int64
}

func (f *moveFlags) add(cmd *cobra.Command, releaseFlag, releaseHelp string) {
	f.storeFlags.add(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&f.env, "env", "", "environment tag (required)")
	fl.Int64Var(&f.release, releaseFlag, 0, releaseHelp+" (required)")
	fl.StringVar(&f.reason, "reason", "", "why, recorded with every pointer move (required)")
	fl.StringVar(&f.actor, "actor", "", "who, recorded with every pointer move (required)")
	fl.StringVar(&f.commandID, "command-id", "", "command UUID; re-running with the same id replays (default: a new UUID)")
	for _, n := range []string{"env", releaseFlag, "reason", "actor"} {
		_ = cmd.MarkFlagRequired(n)
	}
}

func (f *moveFlags) id() string {
	if f.commandID == "" {
		f.commandID = uuid.NewString()
	}
	return f.commandID
}

func addRollbackCmd(root *cobra.Command) {
	var f moveFlags
	cmd := &cobra.Command{
		Use:   "rollback --env ENV --to-release N --reason TEXT --actor NAME --key cosign.key",
		Short: "Move every pointer of an environment back to the snapshots of an older release",
		Long: `rollback points every target of ENV at its snapshot in release N (older than
the current release), signs a new delivery manifest per moved target and records
one pointer move each, in one transaction. Snapshots are never edited; a revoked
snapshot is refused. Exit 3: outcome unknown, re-run with the printed
--command-id or run reconcile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, closeFn, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := store.Rollback(cmd.Context(), promoter.RollbackInput{
				CommandID: f.id(), EnvTag: f.env, ToRelease: f.release, Actor: f.actor, Reason: f.reason,
			})
			if err != nil {
				return storeError(fmt.Errorf("%w (command %s)", err, f.commandID), f.env)
			}
			return printActivation(cmd.OutOrStdout(), res)
		},
	}
	f.add(cmd, "to-release", "release to roll back to")
	root.AddCommand(cmd)
}

func printActivation(w io.Writer, res *promoter.ActivationResult) error {
	what := "done"
	if res.Replayed {
		what = "already done (replayed)"
	}
	_, err := fmt.Fprintf(w, "%s %s release %d (from %d): %s; %d pointers moved, %d unchanged; command %s\n",
		res.EnvTag, res.Action, res.ReleaseVersion, res.PreviousRelease, what, res.Moved, res.Unchanged, res.CommandID)
	return err
}
