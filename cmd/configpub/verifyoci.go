package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/registry"
)

func addVerifyOCICmd(root *cobra.Command) {
	var (
		rf       registryFlags
		keyPath  string
		identity bundle.Identity
	)
	cmd := &cobra.Command{
		Use:   "verify-oci REF@DIGEST --trust-key cosign.pub",
		Short: "Verify an artifact: layer digest, cosign signature bound to the digest, identity annotations",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, _, err := registry.ParseRef(args[0]); err != nil {
				return usageError{err}
			}
			pem, err := os.ReadFile(keyPath)
			if err != nil {
				return err
			}
			keys, err := signing.ParsePublicKeys(pem)
			if err != nil {
				return fmt.Errorf("%s: %w", keyPath, err)
			}
			c, err := rf.client()
			if err != nil {
				return err
			}
			opts := registry.VerifyOptions{Keys: keys}
			if identity != (bundle.Identity{}) {
				opts.Identity = &identity
			}
			v, err := c.Verify(cmd.Context(), args[0], opts)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if _, err := fmt.Fprintf(w, "verified %s\nsigned by %s\n", v.Ref(), v.KeyID); err != nil {
				return err
			}
			if a := v.Artifact; a.Host != "" {
				_, err = fmt.Fprintf(w, "target %s/%s/%s audience %s snapshot %s release %d layer %s\n",
					a.EnvTag, a.Host, a.ServiceID, a.Audience, a.SnapshotID, a.ReleaseVersion, a.ArtifactDigest)
			}
			return err
		},
	}
	rf.add(cmd)
	cmd.Flags().StringVar(&keyPath, "key", "", "cosign.pub with the trusted public key(s); several PEM blocks for rotation (required)")
	cmd.Flags().StringVar(&identity.Host, "host", "", "expected dev.configpub.host")
	cmd.Flags().StringVar(&identity.ServiceID, "service-id", "", "expected dev.configpub.service-id")
	cmd.Flags().StringVar(&identity.EnvTag, "env-tag", "", "expected dev.configpub.env-tag")
	_ = cmd.MarkFlagRequired("key")
	root.AddCommand(cmd)
}
