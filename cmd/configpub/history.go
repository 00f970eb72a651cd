package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/safetext"
	"github.com/configpub/configpub/promoter"
)

func addHistoryCmd(root *cobra.Command) {
	var (
		sf                  storeFlags
		env, target, format string
		limit               int
		releases, revoked   bool
	)
	cmd := &cobra.Command{
		Use:   "history --env ENV [--target HOST[/SERVICE] | --releases | --revocations] [--limit N]",
		Short: "List pointer moves with actor, reason, command and the runtime reports about each move's snapshot",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if releases && revoked {
				return usageError{fmt.Errorf("--releases and --revocations list different journals: give one")}
			}
			if target != "" && (releases || revoked) {
				return usageError{fmt.Errorf("--target selects pointer moves: it does not go with --releases or --revocations")}
			}
			var filter promoter.HistoryFilter
			if target != "" {
				host, svc, _ := strings.Cut(target, "/")
				if host == "" {
					return usageError{fmt.Errorf("--target %q: want HOST or HOST/SERVICE", target)}
				}
				filter.Host, filter.ServiceID = host, svc
			}
			if limit < 0 {
				return usageError{fmt.Errorf("--limit %d: want the number of newest entries, or 0 for all", limit)}
			}
			filter.Limit = limit
			store, closeFn, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			if releases {
				evs, err := store.ReleaseEvents(cmd.Context(), env, limit)
				if err != nil {
					return err
				}
				if format == "json" {
					return writeJSONArray(cmd.OutOrStdout(), evs)
				}
				return printReleaseEvents(cmd.OutOrStdout(), evs)
			}
			if revoked {
				vs, err := store.Revocations(cmd.Context(), env, limit)
				if err != nil {
					return err
				}
				if format == "json" {
					return writeJSONArray(cmd.OutOrStdout(), vs)
				}
				return printRevocations(cmd.OutOrStdout(), vs)
			}
			each := func(fn func(*promoter.Move) error) error {
				return store.EachMove(cmd.Context(), env, filter, fn)
			}
			if format == "json" {
				return writeJSONEach(cmd.OutOrStdout(), each)
			}
			if err := printHistory(cmd.OutOrStdout(), each); err != nil {
				return err
			}
			return writeWorkflowViewHistory(cmd.Context(), cmd.OutOrStdout(), store, env)
		},
	}
	sf.add(cmd, false)
	fl := cmd.Flags()
	fl.StringVar(&env, "env", "", "environment tag (required)")
	fl.StringVar(&target, "target", "", "only moves of HOST or HOST/SERVICE")
	fl.IntVar(&limit, "limit", 0, "only the newest N moves (0 = all)")
	fl.BoolVar(&releases, "releases", false, "list the release journal instead: every state and outcome change (staged, activated, failed, integrity errors, break-glass reasons, health gate)")
	fl.BoolVar(&revoked, "revocations", false, "list the environment's revocations instead: the snapshot (and its target) or publication (and its release) revoked, why, by whom, when, and how many current pointers are still at it")
	formatFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("env")
	root.AddCommand(cmd)
}

// printHistory prints the moves each passes as a table, each formatted as
// it comes, in blocks of tableBlock rows (the journal grows with every
// release for as long as the store lives). Actor, reason (a commit subject
// or an operator's text) and command id are printed with control
// characters escaped: they must not drive the terminal.
func printHistory(w io.Writer, each func(func(*promoter.Move) error) error) error {
	term := safetext.Terminal
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTARGET\tACTION\tRELEASE\tSEQ\tFROM\tTO\tRUNTIME\tACTOR\tREASON\tCOMMAND")
	rows := blockRows{tw: tw}
	err := each(func(m *promoter.Move) error {
		if err := rows.next(); err != nil {
			return err
		}
		from := m.PreviousSnapshotID
		if from == "" {
			from = "-"
		}
		rt := "-"
		if m.AppliedAt != nil {
			rt = "applied after " + m.AppliedAt.Sub(m.MovedAt).Round(time.Second).String()
		}
		if m.Rejections > 0 {
			rt += fmt.Sprintf(", %d rejected", m.Rejections)
		}
		if m.ReceiptAt != nil {
			rt += ", receipt after " + m.ReceiptAt.Sub(m.MovedAt).Round(time.Second).String()
		}
		to := short(m.NextSnapshotID, 8)
		if m.Retired {
			to = "RETIRED"
		}
		_, err := fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", m.MovedAt.Format(time.RFC3339), m.Host, m.ServiceID,
			m.Action, releaseCell(m.ReleaseVersion, m.Renewal), m.Sequence, short(from, 8), to, rt, term(m.Actor), term(m.Reason), term(m.CommandID))
		return err
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

// printReleaseEvents prints the release journal as a table, actor and
// reason escaped like printHistory's.
func printReleaseEvents(w io.Writer, evs []promoter.ReleaseEvent) error {
	term := safetext.Terminal
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tRELEASE\tSEQ\tEVENT\tSTATE\tOUTCOME\tACTOR\tREASON")
	for _, e := range evs {
		state, outcome := e.ToState, e.ToOutcome
		if e.FromState != "" && e.FromState != e.ToState {
			state = e.FromState + "->" + e.ToState
		}
		if e.FromOutcome != "" && e.FromOutcome != e.ToOutcome {
			outcome = e.FromOutcome + "->" + e.ToOutcome
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.RecordedAt.Format(time.RFC3339), releaseCell(e.ReleaseVersion, e.Renewal), e.Sequence,
			term(e.Kind), state, outcome, term(e.Actor), term(e.Reason))
	}
	return tw.Flush()
}

// printRevocations prints revocations as a table, actor and reason escaped
// like printHistory's. CURRENT counts the current pointers still at a
// revoked snapshot: each needs a release or a rollback before its lease ends.
func printRevocations(w io.Writer, vs []promoter.RevocationRecord) error {
	term := safetext.Terminal
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tID\tREVOKED\tRELEASE\tSNAPSHOTS\tCURRENT\tACTOR\tREASON")
	for _, v := range vs {
		what := "publication " + v.PublicationID
		if v.SnapshotID != "" {
			what = "snapshot " + short(v.SnapshotID, 8) + " (" + v.Host + "/" + v.ServiceID + ")"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%s\t%s\n", v.RevokedAt.Format(time.RFC3339), v.RevocationID, what,
			v.ReleaseVersion, v.Snapshots, v.Current, term(v.Actor), term(v.Reason))
	}
	return tw.Flush()
}

// releaseCell is a release version as the history's tables print it: a
// renewal release (compiled from the same policy sources as its base, by
// configpub compile --renew) is marked, so that policy changes stand out
// among daily renewals.
func releaseCell(version int64, renewal bool) string {
	if renewal {
		return strconv.FormatInt(version, 10) + " (renewal)"
	}
	return strconv.FormatInt(version, 10)
}
