package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/policytree"
)

func addValidateCmd(root *cobra.Command) {
	var audience string
	cmd := &cobra.Command{
		Use:   "validate FILE [--config-audience agent|gateway|knowledge]",
		Short: "Check a values.yml against its audience schema and the digest rules",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := policytree.ReadFile(args[0], 0)
			if err != nil {
				return err
			}
			r, err := compiler.ValidateArtifact(args[0], b, audience)
			if err != nil {
				return err
			}
			e := r.Envelope
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: valid %s artifact for %s/%s/%s\n  publicationId %s release %d\n  contentDigest  %s\n  artifactDigest %s\n",
				args[0], r.Audience, e.Host, e.ServiceID, e.EnvTag, e.PublicationID, e.ReleaseVersion, r.ContentDigest, r.ArtifactDigest)
			return err
		},
	}
	cmd.Flags().StringVar(&audience, "audience", "", "audience to validate against (default: runtimePolicy.audience)")
	root.AddCommand(cmd)
}
