package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// newRegistryAttachCmd is `configpub registry attach`.
func newRegistryAttachCmd() *cobra.Command {
	var (
		sf  storeFlags
		rf  registryFlags
		env string
	)
	cmd := &cobra.Command{
		Use:   "attach --env ENV [--database URL] [--plain-http]",
		Short: "Attach every current pointer's signed delivery manifest to its artifact as an OCI referrer",
		Long: `attach reads, for every current pointer of ENV, the signed delivery manifest the
Config Server serves and attaches it to the pointer's artifact in the registry as an
OCI referrer (artifactType application/vnd.configpub.delivery-manifest.v1+json), so a
runtime pulling the artifact by digest (configpub fetch --oci, client.LoadOCI) finds a
manifest that vouches for it: lease, replay and revocation epoch included. Run it after
every promote, activate, rollback and lease renewal. Attaching is idempotent; revoked
snapshots get nothing. Registry credentials come from the Docker config file.`,
		Example: `  configpub registry attach --env prod --database "$CONFIGPUB_DATABASE_URL"
  configpub lease renew --env prod --key cosign.key && configpub registry attach --env prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			res, err := store.AttachDeliveryManifests(ctx, env, rc)
			if err != nil {
				return err
			}
			rep := attachReport{EnvTag: env, Attached: append([]string{}, res.Attached...), Skipped: res.Skipped}
			return report(cmd, rep, func(w io.Writer) error {
				msg := fmt.Sprintf("%s: attached %d delivery manifests", env, len(res.Attached))
				if len(res.Skipped) > 0 {
					msg += fmt.Sprintf(" (%d skipped: revoked or no OCI reference: %s)", len(res.Skipped), strings.Join(res.Skipped, ", "))
				}
				_, err := fmt.Fprintln(w, msg)
				return err
			})
		},
	}
	sf.add(cmd, false)
	rf.add(cmd)
	outputFlag(cmd)
	cmd.Flags().StringVar(&env, "env", "", "environment tag (required)")
	_ = cmd.MarkFlagRequired("env")
	return cmd
}

// attachReport is what registry attach prints with --output json.
type attachReport struct {
	EnvTag   string   `json:"envTag"`
	Attached []string `json:"attached"`          // host/serviceId
	Skipped  []string `json:"skipped,omitempty"` // host/serviceId: revoked, or no OCI reference
}
