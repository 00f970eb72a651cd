package main

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/internal/safetext"
	"github.com/configpub/configpub/readback"
)

func addReadbackCmd(root *cobra.Command) {
	var (
		sf                storeFlags
		env, targets, key string
		one               readback.Target
		reload, prefetch  bool
		concurrency       int
		format            string
	)
	cmd := &cobra.Command{
		Use:   "readback --env ENV (--targets FILE | --endpoint URL --host H --service-id S) --control-key cosign.key",
		Short: "Read runtimes' status endpoints back with the control-plane key and record receipts",
		Long: `readback reads each runtime's status endpoint (configpub fetch --status-listen, or
the runtime library's StatusHandler) with a control token signed by --control-key (the
control-plane key the runtimes trust with --control-pub; never the manifest key), checks that
the answer is about the identity asked for, and records what the runtime runs, keeps as
last-known-good and last rejected as receipts: status and history show them apart from the
runtimes' own reports. --reload asks each runtime to load now (POST /reload) and records the
result it answers with; --prefetch asks each to fetch and verify the staged candidate
(configPhase=candidate) and records READY or REJECTED as a candidate-phase receipt, which
two-phase activation waits for. Reading the same state twice records it once.
--targets is a YAML file: targets: [{endpoint, host, serviceId, envTag}, ...]; --concurrency
runtimes are read at once and the results are printed in the file's order.
Exit status: 0 every target read and recorded; 1 some target unreachable, refused, or answering
with snapshots the store does not hold for it (the others are still recorded).`,
		Example: `  configpub readback --env prod --targets runtimes.yaml --control-key control.key
  configpub readback --env prod --endpoint https://agent-7.internal:9464 --host h --service-id s --control-key control.key --reload`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if concurrency < 1 || concurrency > readback.MaxConcurrency {
				return usageError{fmt.Errorf("--concurrency %d: want 1 to %d", concurrency, readback.MaxConcurrency)}
			}
			ts, err := readbackTargets(targets, env, one)
			if err != nil {
				return usageError{err}
			}
			password, err := cosignPassword()
			if err != nil {
				return usageError{err}
			}
			signer, err := cosignkey.LoadPrivateKeyFile(key, password)
			if err != nil {
				return err
			}
			col, err := readback.NewCollector(readback.Options{Signer: signer, Reload: reload, Prefetch: prefetch, Concurrency: concurrency})
			if err != nil {
				return usageError{err}
			}
			u, err := sf.url()
			if err != nil {
				return err
			}
			pool, err := pgsession.NewPool(cmd.Context(), u)
			if err != nil {
				return fmt.Errorf("--database: %w", err)
			}
			defer pool.Close()
			// Each result is written as it comes, in the order of the
			// targets; the readback's own error (some target not
			// recorded) is returned after all of them.
			var runErr error
			each := func(emit func(*readback.Result) error) error {
				var writeErr error
				runErr = readback.Each(cmd.Context(), col, readback.NewStore(pool), ts, func(r *readback.Result) error {
					writeErr = emit(r)
					return writeErr
				})
				return writeErr
			}
			if format == "json" {
				err = writeJSONEach(cmd.OutOrStdout(), each)
			} else {
				err = printReadback(cmd.OutOrStdout(), each)
			}
			if err != nil {
				return err
			}
			return runErr
		},
	}
	fl := cmd.Flags()
	sf.add(cmd, false)
	fl.StringVar(&env, "env", "", "environment (envTag) of the targets (required)")
	fl.StringVar(&targets, "targets", "", "YAML file listing the runtimes' status endpoints and identities")
	fl.StringVar(&one.Endpoint, "endpoint", "", "one runtime's status endpoint base URL (instead of --targets)")
	fl.StringVar(&one.Host, "host", "", "with --endpoint: the runtime's host")
	fl.StringVar(&one.ServiceID, "service-id", "", "with --endpoint: the runtime's serviceId")
	fl.StringVar(&key, "control-key", "", "cosign.key of the control plane; password from COSIGN_PASSWORD (required)")
	fl.BoolVar(&reload, "reload", false, "ask each runtime to load now (POST /reload) and record its answer")
	fl.BoolVar(&prefetch, "prefetch", false, "ask each runtime to verify its staged candidate now (POST /prefetch) and record READY or REJECTED")
	fl.IntVar(&concurrency, "concurrency", readback.DefaultConcurrency, fmt.Sprintf("how many runtimes to read and record at once (1 to %d)", readback.MaxConcurrency))
	formatFlag(cmd, &format)
	_ = cmd.MarkFlagRequired("env")
	_ = cmd.MarkFlagRequired("control-key")
	root.AddCommand(cmd)
}

// readbackTargets returns the targets of --targets or of --endpoint.
func readbackTargets(file, env string, one readback.Target) ([]readback.Target, error) {
	switch {
	case file != "" && one.Endpoint != "":
		return nil, errors.New("--targets and --endpoint exclude each other")
	case file != "":
		return readback.LoadTargets(file, env)
	case one.Endpoint == "":
		return nil, errors.New("--targets or --endpoint is required")
	}
	one.EnvTag = env
	if err := one.Validate(env); err != nil {
		return nil, err
	}
	return []readback.Target{one}, nil
}

// printReadback prints the results each passes as a table, each formatted
// as it comes, in blocks of tableBlock rows.
func printReadback(w io.Writer, each func(func(*readback.Result) error) error) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tCURRENT\tLAST-KNOWN-GOOD\tLAST REJECTED\tRECORDED\tERROR")
	rows := blockRows{tw: tw}
	err := each(func(r *readback.Result) error {
		if err := rows.next(); err != nil {
			return err
		}
		cur, lkg, rej := "-", "-", "-"
		if st := r.Status; st != nil {
			cur, lkg = stateID(st.Current), stateID(st.LastKnownGood)
			if st.LastRejected != nil {
				rej = stateID(st.LastRejected) + " " + safetext.Terminal(st.LastRejected.Reason)
			}
			if st.FailedClosed {
				cur = "FAILED CLOSED"
			}
		}
		msg := "-"
		if r.Error != "" {
			msg = safetext.Terminal(r.Error)
		}
		_, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.Target.Identity(), cur, lkg, rej, r.Recorded, msg)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Flush()
}

func stateID(s *bundle.SnapshotState) string {
	if s == nil || s.SnapshotID == "" {
		return "-"
	}
	return s.SnapshotID
}
