package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/promoter"
)

func addRevokeCmd(root *cobra.Command) {
	var (
		sf                                              storeFlags
		snapshot, publication, reason, actor, commandID string
	)
	cmd := &cobra.Command{
		Use:   "revoke (--snapshot ID | --publication ID) --reason TEXT",
		Short: "Revoke a snapshot or a whole publication: it is never activated again",
		Long: `revoke records a revocation (append-only). Promote, activate and rollback refuse
any release containing a revoked snapshot, and lease renewal stops renewing it, so
a runtime still holding it loses it when its lease expires. The output names the
targets whose current pointer is at a revoked snapshot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (snapshot == "") == (publication == "") {
				return usageError{errors.New("give exactly one of --snapshot and --publication")}
			}
			if actor == "" {
				actor = os.Getenv("USER")
			}
			if actor == "" {
				return usageError{errors.New("--actor is required ($USER is not set)")}
			}
			if commandID == "" {
				commandID = uuid.NewString()
			}
			store, closeFn, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
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
			if len(res.Current) > 0 {
				msg += "\ncurrently pointed at by: " + strings.Join(res.Current, ", ") + " (roll back or promote a new release)"
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
			return err
		},
	}
	sf.add(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&snapshot, "snapshot", "", "snapshot id to revoke")
	fl.StringVar(&publication, "publication", "", "publication id whose every snapshot is revoked")
	fl.StringVar(&reason, "reason", "", "why (required)")
	fl.StringVar(&actor, "actor", "", "who (default $USER)")
	fl.StringVar(&commandID, "command-id", "", "command UUID; re-running with the same id replays (default: a new UUID)")
	_ = cmd.MarkFlagRequired("reason")
	root.AddCommand(cmd)
}
