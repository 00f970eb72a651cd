package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/safetext"
	"github.com/configpub/configpub/promoter"
)

// formatFlag validates --format text|json.
func formatFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVar(format, "format", "text", "output format: text or json")
}

func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return usageError{fmt.Errorf("--format %q: want text or json", format)}
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func addStatusCmd(root *cobra.Command) {
	var (
		sf          storeFlags
		env, format string
	)
	cmd := &cobra.Command{
		Use:   "status --env ENV [--format text|json]",
		Short: "Show an environment's publication timeline: releases and, per target, what is live",
		Long: `status prints the releases of ENV (lifecycle state, execution outcome, revision)
and, per target, the current snapshot, the release that created it, its digests,
its state (PUBLISHED, APPLIED or REJECTED by the runtime's last evidence,
LEASE_EXPIRED, REVOKED), the release before the last move and the last runtime
evidence. --format json prints
{"envTag","currentRelease","releases":[...],"targets":[{"host","serviceId","envTag",
"audience","snapshotId","releaseVersion","artifactDigest","contentDigest",
"policyDigest","state",...}]}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			store, closeFn, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			st, err := store.Status(cmd.Context(), env)
			if err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), st)
			}
			return printStatus(cmd.OutOrStdout(), st)
		},
	}
	sf.add(cmd, false)
	cmd.Flags().StringVar(&env, "env", "", "environment tag (required)")
	formatFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("env")
	root.AddCommand(cmd)
}

func printStatus(w io.Writer, st *promoter.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "environment %s: current release %d", st.EnvTag, st.CurrentRelease)
	if st.PendingRelease != 0 {
		fmt.Fprintf(tw, " (release %d pending: run reconcile if no promote is running)", st.PendingRelease)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "\nRELEASE\tSTATE\tOUTCOME\tREV\tTARGETS\tCOMMIT\tACTOR\tUPDATED\tREASON")
	for _, r := range st.Releases {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", r.ReleaseVersion, r.State, r.Outcome, r.RowRevision,
			r.TargetCount, short(r.SourceCommit, 12), safetext.Terminal(r.Actor), r.UpdatedAt.UTC().Format(time.RFC3339), safetext.Terminal(r.Reason))
	}
	fmt.Fprintln(tw, "\nTARGET\tAUDIENCE\tSNAPSHOT\tRELEASE\tPREV\tSEQ\tSTATE\tLEASE EXPIRES\tLAST EVIDENCE")
	for _, t := range st.Targets {
		ev := "-"
		if e := t.LastEvidence; e != nil {
			ev = fmt.Sprintf("%s %s at %s", safetext.Terminal(e.Outcome), safetext.Terminal(short(e.SnapshotID, 8)), e.ReportedAt.Format(time.RFC3339))
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", t.Host, t.ServiceID, t.Audience, t.SnapshotID,
			t.ReleaseVersion, t.PreviousRelease, t.Sequence, t.State, t.LeaseExpiresAt.Format(time.RFC3339), ev)
	}
	printWorkflowViews(tw, st.WorkflowViews, true)
	return tw.Flush()
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
