package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/safetext"
	"github.com/configpub/configpub/promoter"
)

// formatFlag adds -o/--output text|json.
func formatFlag(cmd *cobra.Command, format *string) {
	cmd.Flags().StringVar(format, "format", "text", "output format: text or json")
}

func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return usageError{fmt.Errorf("--output %q: want text or json", format)}
	}
	return nil
}

// streamBuffer is how much of a streamed JSON document (status and history
// -o json) is held before the first byte is written: a read that fails
// before the document reaches it (a database connection lost midway)
// prints nothing on stdout, only the error, with exit 1. A longer
// document is written as it is read, and a failure leaves it cut short:
// never valid JSON, so a consumer (jq) fails too.
const streamBuffer = 1 << 20

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// statusReader reads an environment's status head and then its targets,
// one at a time.
type statusReader interface {
	StatusHead(ctx context.Context, envTag string) (*promoter.Status, error)
	EachTargetStatus(ctx context.Context, envTag string, fn func(*promoter.TargetStatus) error) error
	Now() time.Time // the store's clock, which activation windows are checked against
}

// writeStatusJSON writes envTag's status exactly as writeJSON would write
// the whole Status, encoding each target as it is read: at 100,000 targets
// neither the targets, the 86 MB document nor its indented copy is held in
// memory, only its first streamBuffer bytes until they are written.
func writeStatusJSON(ctx context.Context, w io.Writer, sr statusReader, envTag string) error {
	head, err := sr.StatusHead(ctx, envTag)
	if err != nil {
		return err
	}
	head.Targets = []promoter.TargetStatus{}
	var doc bytes.Buffer
	if err := writeJSON(&doc, head); err != nil {
		return err
	}
	// A JSON string holds no raw newline: this is the top-level key.
	const empty = "\n  \"targets\": []"
	before, after, ok := bytes.Cut(doc.Bytes(), []byte(empty))
	if !ok {
		return errors.New("status: no targets field in the encoded status")
	}
	bw := bufio.NewWriterSize(w, streamBuffer)
	bw.Write(before)
	bw.WriteString("\n  \"targets\": [")
	n := 0
	err = sr.EachTargetStatus(ctx, envTag, func(t *promoter.TargetStatus) error {
		n++
		return writeJSONElem(bw, "    ", n == 1, t)
	})
	if err != nil {
		return err
	}
	if n > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("]")
	bw.Write(after)
	return bw.Flush()
}

// writeJSONArray writes items exactly as writeJSON would, one element at a
// time.
func writeJSONArray[T any](w io.Writer, items []T) error {
	if items == nil {
		return writeJSON(w, items)
	}
	return writeJSONEach(w, func(emit func(*T) error) error {
		for i := range items {
			if err := emit(&items[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeJSONEach writes the elements each emits as writeJSON would write the
// slice of them, encoding each as it comes: none is held, only the first
// streamBuffer bytes of the document until they are written.
func writeJSONEach[T any](w io.Writer, each func(emit func(*T) error) error) error {
	bw := bufio.NewWriterSize(w, streamBuffer)
	bw.WriteString("[")
	n := 0
	err := each(func(v *T) error {
		n++
		return writeJSONElem(bw, "  ", n == 1, v)
	})
	if err != nil {
		return err
	}
	if n > 0 {
		bw.WriteString("\n")
	}
	bw.WriteString("]\n")
	return bw.Flush()
}

// writeJSONElem writes one element of an indented JSON array on a new line
// at indentation prefix, after a comma unless it is the first.
func writeJSONElem(bw *bufio.Writer, prefix string, first bool, v any) error {
	if !first {
		bw.WriteString(",")
	}
	bw.WriteString("\n" + prefix)
	b, err := json.MarshalIndent(v, prefix, "  ")
	if err != nil {
		return err
	}
	_, err = bw.Write(b)
	return err
}

func addStatusCmd(root *cobra.Command) {
	var (
		sf          storeFlags
		env, format string
	)
	cmd := &cobra.Command{
		Use:   "status --env ENV [-o text|json]",
		Short: "Show an environment's publication timeline: releases and, per target, what is live",
		Long: `status prints the releases of ENV (lifecycle state, execution outcome, revision)
and, per target, keeps apart:
  - the desired pointer: the current snapshot, the release that created it, its digests,
    sequence and lease;
  - what the runtime runs, as the control plane read it back from the runtime's status
    endpoint with its own credential (configpub readback receipts): the snapshot the last
    receipt names as running (RUNNING), and whether it diverges from the desired one (DIVERGED);
  - the acknowledgement: when a receipt first read the runtime running the desired snapshot
    after the pointer moved, and the lag since the move (pending while none has);
  - its last rejection receipt (reason, snapshot, time) and how many since the move;
  - RECEIPT: the last receipt, naming what the runtime runs and its last-known-good.
STATE is RETIRED (no longer in the active release), REVOKED, LEASE_EXPIRED, APPLIED (the last
receipt, read since the pointer last moved, reads the runtime running the desired snapshot, even
if it rejected a tampered response since), REJECTED (it rejected the desired snapshot since the
move and runs another) or PUBLISHED (no receipt since the move says either: one read before it,
e.g. before a retirement the target came back from at the same snapshot, confirms nothing).
UNVERIFIED is the runtime's own last report (POST /configs/evidence with its workload token):
an observation, shown and never counted in any other column.
An environment without releases is an error (exit 1). --output json prints
{"envTag","currentRelease","releases":[...],"targets":[{"host","serviceId","envTag",
"audience","snapshotId","releaseVersion","publicationId","artifactDigest","contentDigest",
"policyDigest","state","sequence","movedAt","leaseExpiresAt","running":{"snapshotId",
"releaseVersion","publicationId","reportedAt"},"diverged","acknowledgedAt","ackLagSeconds",
"lastRejection":{...},"rejectionsSinceMove","lastEvidence":{...},"lastReceipt":{...},
"lastObservation":{...}}]}; each
report carries "kind" (observation or receipt) and "phase" (current or candidate).`,
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
			if format == "json" {
				return writeStatusJSON(cmd.Context(), cmd.OutOrStdout(), store, env)
			}
			return printStatus(cmd.Context(), cmd.OutOrStdout(), store, env)
		},
	}
	sf.add(cmd, false)
	cmd.Flags().StringVar(&env, "env", "", "environment tag (required)")
	formatFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("env")
	root.AddCommand(cmd)
}

// activatable says when every target of release r can be moved to it
// (activated, or rolled back to) as of now: "until T", "ended T", "from T"
// before its windows open, "-" when no window is known.
func activatable(r promoter.ReleaseStatus, now time.Time) string {
	switch {
	case r.Revoked:
		return "never (revoked)"
	case r.ActivatableUntil == nil:
		return "-"
	case !now.Before(*r.ActivatableUntil):
		return "ended " + r.ActivatableUntil.UTC().Format(time.RFC3339)
	case r.ActivatableFrom != nil && now.Before(*r.ActivatableFrom):
		return "from " + r.ActivatableFrom.UTC().Format(time.RFC3339)
	}
	return "until " + r.ActivatableUntil.UTC().Format(time.RFC3339)
}

// printStatus writes envTag's status as tables, each target's row formatted
// as it is read, the targets' table in blocks of tableBlock rows.
func printStatus(ctx context.Context, w io.Writer, sr statusReader, envTag string) error {
	st, err := sr.StatusHead(ctx, envTag)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "environment %s: current release %d", st.EnvTag, st.CurrentRelease)
	if st.PendingRelease != 0 {
		fmt.Fprintf(tw, " (release %d pending: run reconcile if no promote is running)", st.PendingRelease)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "\nRELEASE\tSTATE\tOUTCOME\tREV\tTARGETS\tCOMMIT\tACTOR\tUPDATED\tACTIVATABLE\tRENEWAL\tREASON")
	now := sr.Now()
	for _, r := range st.Releases {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ReleaseVersion, r.State, r.Outcome, r.RowRevision,
			r.TargetCount, short(r.SourceCommit, 12), safetext.Terminal(r.Actor), r.UpdatedAt.UTC().Format(time.RFC3339),
			activatable(r, now), yesNo(r.Renewal), safetext.Terminal(r.Reason))
	}
	fmt.Fprintln(tw, "\nTARGET\tAUDIENCE\tDESIRED\tRELEASE\tPREV\tSEQ\tSTATE\tRUNNING\tDIVERGED\tACKNOWLEDGED\tLAST REJECTION\tRECEIPT\tUNVERIFIED\tLEASE EXPIRES")
	rows := blockRows{tw: tw}
	err = sr.EachTargetStatus(ctx, envTag, func(t *promoter.TargetStatus) error {
		if err := rows.next(); err != nil {
			return err
		}
		_, err := fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Host, t.ServiceID, t.Audience, t.SnapshotID,
			t.ReleaseVersion, t.PreviousRelease, t.Sequence, t.State, running(*t), yesNo(t.Diverged), acknowledged(*t),
			lastRejection(*t), receipt(*t), observation(*t), t.LeaseExpiresAt.Format(time.RFC3339))
		return err
	})
	if err != nil {
		return err
	}
	printWorkflowViews(tw, st.WorkflowViews, true)
	return tw.Flush()
}

// tableBlock is how many rows of a long table are aligned together: a
// table that grows with an environment's targets or with its journal is
// written in blocks of this many rows, each block's columns aligned on
// their own (as kubectl get --chunk-size does), so memory holds one block.
const tableBlock = 1000

// blockRows counts the rows written to tw and flushes it before each block
// after the first.
type blockRows struct {
	tw   *tabwriter.Writer
	rows int
}

// next is called before each row is written.
func (b *blockRows) next() error {
	if b.rows++; b.rows > tableBlock && b.rows%tableBlock == 1 {
		return b.tw.Flush()
	}
	return nil
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// running describes the snapshot a runtime reports running.
func running(t promoter.TargetStatus) string {
	r := t.Running
	switch {
	case r == nil:
		return "-"
	case r.SnapshotID == "":
		return "none"
	case r.SnapshotID == t.SnapshotID:
		return "desired"
	case r.ReleaseVersion != 0:
		return fmt.Sprintf("%s (release %d)", short(r.SnapshotID, 8), r.ReleaseVersion)
	default:
		return short(r.SnapshotID, 8) + " (unknown)"
	}
}

// acknowledged describes the acknowledgement of the desired snapshot.
func acknowledged(t promoter.TargetStatus) string {
	lag := time.Duration(t.AckLagSeconds) * time.Second
	if t.AcknowledgedAt == nil {
		return "pending " + lag.String()
	}
	return "after " + lag.String()
}

// lastRejection describes the last rejection and the count since the move.
func lastRejection(t promoter.TargetStatus) string {
	e := t.LastRejection
	if e == nil {
		return "-"
	}
	about := "-"
	if e.SnapshotID != "" {
		about = short(e.SnapshotID, 8)
	}
	return fmt.Sprintf("%s %s at %s (%d since move)", safetext.Terminal(e.Reason), safetext.Terminal(about),
		e.ReportedAt.Format(time.RFC3339), t.RejectionsSinceMove)
}

// receipt describes the last receipt read back from the runtime: what it
// runs (relative to the desired snapshot) and its last-known-good.
func receipt(t promoter.TargetStatus) string {
	e := t.LastReceipt
	if e == nil {
		return "-"
	}
	runs := "desired"
	if e.RunningSnapshotID == "" {
		runs = "none"
	} else if e.RunningSnapshotID != t.SnapshotID {
		runs = short(e.RunningSnapshotID, 8)
	}
	lkg := "-"
	if e.LastKnownGoodSnapshotID != "" {
		lkg = short(e.LastKnownGoodSnapshotID, 8)
	}
	return fmt.Sprintf("%s runs %s lkg %s at %s", safetext.Terminal(e.Outcome), runs, lkg, e.ReportedAt.Format(time.RFC3339))
}

// observation describes the runtime's own last report (unverified).
func observation(t promoter.TargetStatus) string {
	e := t.LastObservation
	if e == nil {
		return "-"
	}
	about := "-"
	if e.SnapshotID == t.SnapshotID {
		about = "desired"
	} else if e.SnapshotID != "" {
		about = short(e.SnapshotID, 8)
	}
	return fmt.Sprintf("%s %s at %s", safetext.Terminal(e.Outcome), about, e.ReportedAt.Format(time.RFC3339))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
