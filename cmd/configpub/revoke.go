package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/textlist"
	"github.com/configpub/configpub/promoter"
)

func addRevokeCmd(root *cobra.Command) {
	var (
		sf                                              storeFlags
		snapshot, publication, reason, actor, commandID string
		env                                             string
		epoch                                           int64
	)
	cmd := &cobra.Command{
		Use:   "revoke (--snapshot ID | --publication ID | --epoch N --env ENV --key cosign.key) --reason TEXT",
		Short: "Revoke a snapshot, a whole publication, or raise an environment's revocation epoch",
		Long: `revoke records a revocation (append-only). Promote, activate and rollback refuse
any release containing a revoked snapshot, and lease renewal stops renewing it, so
a runtime still holding it loses it when its lease expires; Config Servers stop
serving it within a second. --publication revokes every snapshot that
publication (one release) created and the Workflow views recorded under it
(refusing new Workflow admissions); a release that created no snapshot has a
publication of Workflow views only. The output says what the revocation covers
(snapshots, Workflow views, or both: a publication of views only revokes no
runtime's configuration) and names the targets whose current pointer is at a
revoked snapshot.

--epoch N --env ENV raises the environment's revocation epoch, which every
delivery manifest carries and runtimes never accept lower than the highest they
have seen: every current pointer is re-signed at once with the new epoch (same
snapshot, higher sequence), and every later pointer move and lease renewal signs
at least N. The epoch is never lowered (N must be above the current epoch).
Needs --key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			epochSet := cmd.Flags().Changed("epoch")
			if epochSet && epoch <= 0 {
				return usageError{fmt.Errorf("--epoch %d: want a positive epoch, above the environment's current one", epoch)}
			}
			ids := 0
			for _, set := range []bool{snapshot != "", publication != "", epochSet} {
				if set {
					ids++
				}
			}
			if ids != 1 {
				return usageError{errors.New("give exactly one of --snapshot, --publication and --epoch")}
			}
			if epoch != 0 && (env == "" || sf.key == "") {
				return usageError{errors.New("--epoch needs --env and --key")}
			}
			if epoch == 0 && env != "" {
				return usageError{errors.New("--env is only used with --epoch")}
			}
			actor, commandID, err := actorAndCommand(actor, commandID)
			if err != nil {
				return err
			}
			store, closeFn, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			if epoch != 0 {
				res, err := store.RaiseEpoch(cmd.Context(), promoter.EpochInput{
					CommandID: commandID, EnvTag: env, Epoch: epoch, Actor: actor, Reason: reason,
				})
				if err != nil {
					// The store's errors name the command already.
					return storeError((&moveFlags{commandID: commandID}).failed(err), env)
				}
				msg := fmt.Sprintf("%s revocation epoch %d -> %d: %d current pointers re-signed (release %d active); command %s",
					res.EnvTag, res.From, res.To, res.Resigned, res.Release, commandID)
				if res.Replayed {
					msg += " (replayed)"
				}
				msg += notResigned(res)
				return report(cmd, res, func(w io.Writer) error { _, err := fmt.Fprintln(w, msg); return err })
			}
			res, err := store.Revoke(cmd.Context(), promoter.RevokeInput{
				CommandID: commandID, SnapshotID: snapshot, PublicationID: publication, Reason: reason, Actor: actor,
			})
			if err != nil {
				if errors.Is(err, promoter.ErrUnconfirmed) {
					return unconfirmedError{fmt.Errorf("%w (re-run with --command-id %s)", err, commandID)}
				}
				return err
			}
			what := "snapshot " + snapshot
			if publication != "" {
				what = "publication " + publication
			}
			msg := fmt.Sprintf("revoked %s (revocation %d, command %s)", what, res.RevocationID, commandID)
			if res.Replayed {
				msg += " (replayed)"
			}
			msg += "\n" + revokedCovers(res)
			if len(res.Current) > 0 {
				msg += fmt.Sprintf("\ncurrently pointed at by %d: %s (roll back or promote a new release)",
					res.CurrentCount, textlist.Join(res.Current, res.CurrentCount, len(res.Current)))
			}
			return report(cmd, res, func(w io.Writer) error { _, err := fmt.Fprintln(w, msg); return err })
		},
	}
	sf.add(cmd, false)
	outputFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&snapshot, "snapshot", "", "snapshot id to revoke")
	fl.StringVar(&publication, "publication", "", "publication id whose every snapshot is revoked")
	fl.StringVar(&reason, "reason", "", "why (required)")
	fl.StringVar(&actor, "actor", "", "who (default $USER)")
	fl.StringVar(&commandID, "command-id", "", "command UUID; re-running with the same id replays (default: a new UUID)")
	fl.Int64Var(&epoch, "epoch", 0, "raise the revocation epoch of --env to N (re-signs every current pointer)")
	fl.StringVar(&env, "env", "", "environment tag (with --epoch)")
	fl.StringVar(&sf.key, "key", "", "cosign.key signing delivery manifests (with --epoch); password from COSIGN_PASSWORD")
	_ = cmd.MarkFlagRequired("reason")
	root.AddCommand(cmd)
}

// revokedCovers is the text output's line saying what a revocation covers:
// snapshots (runtimes lose them), Workflow views only (no runtime loses
// anything), or both.
func revokedCovers(res *promoter.Revocation) string {
	switch res.Covers {
	case promoter.RevokedViews:
		return fmt.Sprintf("covers %d Workflow view(s) only, no snapshot: no runtime's configuration is revoked; "+
			"Workflow admissions under it are refused, and admitted work follows the Workflow service's revoked policy",
			res.WorkflowViews)
	case promoter.RevokedBoth:
		return fmt.Sprintf("covers %d snapshot(s) and %d Workflow view(s): runtimes lose the snapshots when their leases expire; "+
			"Workflow admissions under it are refused", res.Snapshots, res.WorkflowViews)
	}
	return fmt.Sprintf("covers %d snapshot(s): runtimes lose them when their leases expire", res.Snapshots)
}

// actorAndCommand defaults a journaled command's --actor to $USER (a usage
// error when neither is set) and its --command-id to a new UUID.
func actorAndCommand(actor, commandID string) (string, string, error) {
	if actor == "" {
		actor = os.Getenv("USER")
	}
	if actor == "" {
		return "", "", usageError{errors.New("--actor is required ($USER is not set)")}
	}
	if commandID == "" {
		commandID = uuid.NewString()
	}
	return actor, commandID, nil
}

// notResigned is the text output's line naming the current pointers a
// re-signing skipped ("" when none).
func notResigned(res *promoter.EpochResult) string {
	if res.SkippedCount == 0 {
		return ""
	}
	return fmt.Sprintf("\nnot re-signed (revoked or no lease window): %d: %s", res.SkippedCount,
		textlist.Join(res.Skipped, res.SkippedCount, len(res.Skipped)))
}
