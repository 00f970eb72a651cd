package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/promoter"
)

func addGateCmd(root *cobra.Command) {
	var (
		sf   storeFlags
		envs []string
		poll time.Duration
		once bool
	)
	cmd := &cobra.Command{
		Use:   "gate --env ENV [--env ENV...] --key cosign.key [--interval D] [--once]",
		Short: "Watch activations through their soak window and roll back unhealthy environments",
		Long: `gate runs the health gate of each environment whose active release has a
healthGate in its Environment document. After an activation (promote or activate)
it watches the soak window: when at least healthGate.rejections distinct moved
targets' receipts reject the new snapshot, or, at the end of the soak, at least
healthGate.missingAcks moved targets have not acknowledged it, it rolls the whole
environment back to the previous release in one transaction, as actor health-gate,
with the evidence in the reason. A soak that ends below every threshold is
journaled once and never re-evaluated. Receipts come from configpub readback;
runtimes' own reports never count. Runs until interrupted (--once: one check).
Before each round it reads --key again: a rotated key (with the same
COSIGN_PASSWORD) signs the rollbacks from then on; a file that cannot be loaded
is reported once and the key in use goes on signing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(envs) == 0 {
				return usageError{errors.New("--env is required")}
			}
			if poll <= 0 {
				return usageError{errors.New("--interval must be positive")}
			}
			if outputJSON(cmd) && !once {
				return usageError{errors.New("--output json needs --once (a running gate logs its steps to stderr)")}
			}
			ctx := cmd.Context()
			key := followKey(sf.key, "gate")
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			if once {
				verdicts := make([]*promoter.GateVerdict, 0, len(envs))
				for _, env := range envs {
					v, err := store.CheckHealth(ctx, env)
					if err != nil {
						return storeError(err, env)
					}
					verdicts = append(verdicts, v)
				}
				return report(cmd, verdicts, func(w io.Writer) error {
					for _, v := range verdicts {
						line := fmt.Sprintf("%s release %d: %s", v.EnvTag, v.Release, v.Verdict)
						if v.Reason != "" {
							line += "; rolled back to release " + fmt.Sprint(v.Previous) + ": " + v.Reason
						}
						if _, err := fmt.Fprintln(w, line); err != nil {
							return err
						}
					}
					return nil
				})
			}
			// Each round reads --key again: a rollback after a signing-key
			// rotation is signed with the new key, which runtimes that
			// have dropped the old one accept.
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			follow := func(s *promoter.Store) *promoter.Store { return key.follow(s, cmd.ErrOrStderr()) }
			if err := store.WatchHealth(ctx, envs, poll, log, follow); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		},
	}
	sf.add(cmd, true)
	cmd.Flags().StringArrayVar(&envs, "env", nil, "environment to watch (repeatable, required)")
	cmd.Flags().DurationVar(&poll, "poll", time.Second, "how often each environment is checked")
	cmd.Flags().BoolVar(&once, "once", false, "check once, print the verdicts and exit")
	outputFlag(cmd)
	root.AddCommand(cmd)
}
