package main

import (
	"fmt"
	"io"

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
			rep := validateReport{File: args[0], Valid: true, Audience: r.Audience, Host: e.Host, ServiceID: e.ServiceID, EnvTag: e.EnvTag,
				PublicationID: e.PublicationID, Release: e.ReleaseVersion, ContentDigest: r.ContentDigest, ArtifactDigest: r.ArtifactDigest}
			return report(cmd, rep, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s: valid %s artifact for %s/%s/%s\n  publicationId %s release %d\n  contentDigest  %s\n  artifactDigest %s\n",
					rep.File, rep.Audience, rep.Host, rep.ServiceID, rep.EnvTag, rep.PublicationID, rep.Release, rep.ContentDigest, rep.ArtifactDigest)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&audience, "audience", "", "audience to validate against (default: runtimePolicy.audience)")
	outputFlag(cmd)
	root.AddCommand(cmd)
}

// validateReport is what validate prints with --output json. A file that
// is not valid exits 1 with the reasons on stderr and prints no report.
type validateReport struct {
	File           string `json:"file"`
	Valid          bool   `json:"valid"`
	Audience       string `json:"audience"`
	Host           string `json:"host"`
	ServiceID      string `json:"serviceId"`
	EnvTag         string `json:"envTag"`
	PublicationID  string `json:"publicationId"`
	Release        int64  `json:"release"`
	ContentDigest  string `json:"contentDigest"`
	ArtifactDigest string `json:"artifactDigest"`
}
