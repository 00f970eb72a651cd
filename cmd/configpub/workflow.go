package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/promoter"
)

func addWorkflowCmd(root *cobra.Command) {
	wf := &cobra.Command{
		Use:   "workflow",
		Short: "Inspect workflow versions",
	}
	var repo string
	diff := &cobra.Command{
		Use:   "diff WFDEFID V1 V2 --repo DIR",
		Short: "Compare two versions of one workflow side by side, as normalized YAML",
		Long: `diff prints versions V1 and V2 of the workflow whose wfDefId (or name) is
WFDEFID, read from the policy repository DIR, side by side. Each version is
normalized: its content (definition, limits, approvals, agents, runner,
retention) and state with the keys of every map sorted, rendered as
configpub-yaml/1, so only real changes show. Markers: ' ' equal, '|' changed,
'<' only in V1, '>' only in V2. The header names both version digests (the
digest a PUBLISHED version is pinned by). It writes nothing. Like compile, it
does not read a file Git ignores and does not track, and says so on stderr.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 3 {
				return usageError{errors.New("want WFDEFID V1 V2")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if repo == "" {
				return usageError{errors.New("--repo is required")}
			}
			tree, err := policytree.Dir(repo, policytree.Limits{})
			if err != nil {
				return err
			}
			defer tree.Close()
			// The sources compile reads: not what Git ignores.
			ignored, err := gitIgnored(repo)
			if err != nil {
				return err
			}
			d, err := compiler.DiffWorkflowVersions(cmd.Context(), tree, ignored, args[0], args[1], args[2])
			if err != nil {
				return err
			}
			warnIgnored(cmd.ErrOrStderr(), d.Ignored)
			return d.WriteSideBySide(cmd.OutOrStdout())
		},
	}
	diff.Flags().StringVar(&repo, "repo", "", "policy repository directory (required)")
	wf.AddCommand(diff)
	root.AddCommand(wf)
}

// writeAddedWorkflowVersions prints, for plan, each workflow version the
// head tree adds, side by side with the version before it.
func writeAddedWorkflowVersions(w io.Writer, base, head *compiler.Result) error {
	ds, err := compiler.AddedWorkflowVersions(base, head)
	if err != nil {
		return fmt.Errorf("plan: workflow versions: %w", err)
	}
	for _, d := range ds {
		if _, err := fmt.Fprintf(w, "\nnew workflow version %s@%s:\n", d.Workflow, d.New.Version); err != nil {
			return err
		}
		if err := d.WriteSideBySide(w); err != nil {
			return err
		}
	}
	return nil
}

// printWorkflowViews prints the recorded Workflow views (only those of the
// current release when currentOnly), one row per release and version.
func printWorkflowViews(w io.Writer, vs []promoter.WorkflowViewStatus, currentOnly bool) {
	if len(vs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWORKFLOW VIEW\tRELEASE\tSTATE\tVIEW DIGEST\tPUBLICATION\tRECORDED")
	for _, v := range vs {
		if currentOnly && !v.Current {
			continue
		}
		fmt.Fprintf(w, "%s@%s\t%d\t%s\t%s\t%s\t%s\n", v.Workflow, v.Version, v.ReleaseVersion, v.State,
			v.ViewDigest, v.PublicationID, v.RecordedAt.Format(time.RFC3339))
	}
}

// writeWorkflowViewHistory prints every recorded Workflow view of env, for
// history.
func writeWorkflowViewHistory(ctx context.Context, w io.Writer, store *promoter.Store, env string) error {
	vs, err := store.WorkflowViews(ctx, env)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	printWorkflowViews(tw, vs, false)
	return tw.Flush()
}
