package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func addReconcileCmd(root *cobra.Command) {
	var (
		sf  storeFlags
		env string
	)
	cmd := &cobra.Command{
		Use:   "reconcile --env ENV",
		Short: "Settle UNCONFIRMED outcomes from the store, exactly once",
		Long: `reconcile looks at every release of ENV whose execution outcome is UNCONFIRMED
(a promote, rollback or activate whose reply was lost or whose process died).
Waiting for any activation still in flight, it settles each from the store: an
activation that committed is already APPLIED; one that never committed becomes
NOT_APPLIED and the environment is free again (re-run the command to retry).
With CONFIGPUB_WEBHOOK_URLS set, each settlement is notified as outcome.settled,
once however many reconciles race. A second reconcile settles nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, closeFn, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := store.Reconcile(cmd.Context(), env)
			if err != nil {
				return storeError(err, env)
			}
			if o, _ := cmd.Flags().GetString("output"); o == "json" {
				return writeJSON(cmd.OutOrStdout(), res)
			}
			w := cmd.OutOrStdout()
			if len(res.Settled) == 0 {
				_, err = fmt.Fprintf(w, "%s: nothing unconfirmed; current release %d\n", env, res.CurrentRelease)
				return err
			}
			for _, s := range res.Settled {
				if _, err := fmt.Fprintf(w, "%s release %d: %s %s (command %s)\n", env, s.ReleaseVersion, s.Action, s.Outcome, s.CommandID); err != nil {
					return err
				}
			}
			_, err = fmt.Fprintf(w, "%s: current release %d\n", env, res.CurrentRelease)
			return err
		},
	}
	sf.add(cmd, false)
	outputFlag(cmd)
	cmd.Flags().StringVar(&env, "env", "", "environment tag (required)")
	_ = cmd.MarkFlagRequired("env")
	root.AddCommand(cmd)
}
