package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/textlist"
	"github.com/configpub/configpub/promoter"
)

// newRegistryAttachCmd is `configpub registry attach`.
func newRegistryAttachCmd() *cobra.Command {
	var (
		sf     storeFlags
		rf     registryFlags
		env    string
		prefix string
	)
	cmd := &cobra.Command{
		Use:   "attach --env ENV [--database URL] [--registry PREFIX] [--plain-http]",
		Short: "Attach every current pointer's signed delivery manifest to its artifact as an OCI referrer",
		Long: `attach reads, for every current pointer of ENV, the signed delivery manifest the
Config Server serves and attaches it to the pointer's artifact in the registry as an
OCI referrer (artifactType application/vnd.configpub.delivery-manifest.v1+json), so a
runtime pulling the artifact by digest (configpub fetch --oci, client.LoadOCI) finds a
manifest that vouches for it: lease, replay and revocation epoch included. Run it after
every promote, activate, rollback and lease renewal. Attaching is idempotent; revoked
snapshots get nothing. Each pointer is attached on its own: one that fails (its artifact
gone from the registry) does not stop the others; the output counts and names the
failed ones and the exit status is 1. Registry credentials come from the Docker config
file.

A snapshot records the registry it was first published to. After moving to another
registry (promote --registry NEW publishes every artifact of its release there, those
it carries over included), pass --registry NEW: each manifest is attached to the
pointer's artifact, by its recorded digest, under that prefix instead.`,
		Example: `  configpub registry attach --env prod --database "$CONFIGPUB_DATABASE_URL"
  configpub lease renew --env prod --key cosign.key && configpub registry attach --env prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if prefix != "" {
				if err := checkRegistryPrefix(prefix); err != nil {
					return usageError{err}
				}
			}
			ctx := cmd.Context()
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			rc, err := rf.client()
			if err != nil {
				return err
			}
			res, err := store.AttachDeliveryManifestsAt(ctx, env, rc, prefix)
			if err != nil && !errors.Is(err, promoter.ErrAttachFailed) {
				return err
			}
			// Some failed, the others are attached: say what was done,
			// then fail.
			if rerr := report(cmd, newAttachReport(env, res), func(w io.Writer) error {
				msg := fmt.Sprintf("%s: attached %d delivery manifests", env, res.AttachedCount)
				if res.SkippedCount > 0 {
					msg += fmt.Sprintf(" (%d skipped: revoked or no OCI reference: %s)", res.SkippedCount,
						textlist.Join(res.Skipped, res.SkippedCount, attachSkippedNamed))
				}
				msg += failedSummary(res) + pruneSummary(res)
				_, err := fmt.Fprintln(w, msg)
				return err
			}); rerr != nil {
				return rerr
			}
			return err
		},
	}
	sf.add(cmd, false)
	rf.add(cmd)
	outputFlag(cmd)
	cmd.Flags().StringVar(&env, "env", "", "environment tag (required)")
	cmd.Flags().StringVar(&prefix, "registry", "", "attach under this registry prefix (registry[:port][/path]) instead of where each snapshot was first published")
	_ = cmd.MarkFlagRequired("env")
	return cmd
}

// attachSkippedNamed is how many skipped pointers the text output of
// registry attach names (its JSON lists promoter.SkippedListed).
const attachSkippedNamed = 10

// attachReport is what registry attach prints with --output json: the
// first promoter.SkippedListed pointers of each list and their counts.
type attachReport struct {
	EnvTag        string   `json:"envTag"`
	AttachedCount int      `json:"attachedCount"`
	Attached      []string `json:"attached"` // host/serviceId
	SkippedCount  int      `json:"skippedCount,omitempty"`
	Skipped       []string `json:"skipped,omitempty"`       // host/serviceId: revoked, or no OCI reference
	FailedCount   int      `json:"failedCount,omitempty"`   // pointers whose attach failed
	Failed        []string `json:"failed,omitempty"`        // host/serviceId
	FailError     string   `json:"failError,omitempty"`     // the first failure
	PrunedCount   int      `json:"prunedCount"`             // superseded referrers removed
	PruneFailures int      `json:"pruneFailures,omitempty"` // artifacts whose superseded referrers stayed
	PruneError    string   `json:"pruneError,omitempty"`    // the first failure
}

// newAttachReport is the report of res, an attach of env's manifests.
func newAttachReport(env string, res *promoter.AttachResult) *attachReport {
	return &attachReport{EnvTag: env, AttachedCount: res.AttachedCount, Attached: append([]string{}, res.Attached...),
		SkippedCount: res.SkippedCount, Skipped: res.Skipped,
		FailedCount: res.FailedCount, Failed: res.Failed, FailError: res.FailError,
		PrunedCount: res.Pruned, PruneFailures: res.PruneFailures, PruneError: res.PruneError}
}

// failedSummary is the text output's account of the pointers whose attach
// failed: how many, and the first few with the first error.
func failedSummary(res *promoter.AttachResult) string {
	if res.FailedCount == 0 {
		return ""
	}
	return fmt.Sprintf("; %d failed (%s; first: %s)", res.FailedCount,
		textlist.Join(res.Failed, res.FailedCount, attachSkippedNamed), res.FailError)
}

// pruneSummary is the text output's account of the superseded referrers
// an attach removed, and of those it could not.
func pruneSummary(res *promoter.AttachResult) string {
	s := fmt.Sprintf("; removed %d superseded", res.Pruned)
	if res.PruneFailures > 0 {
		s += fmt.Sprintf(" (%d artifacts kept theirs: %s)", res.PruneFailures, res.PruneError)
	}
	return s
}
