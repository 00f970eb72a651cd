package main

import (
	"fmt"
	"io"
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
				return fmt.Errorf("--trust-key: %w", err)
			}
			keys, err := signing.ParsePublicKeys(pem)
			if err != nil {
				return fmt.Errorf("--trust-key %s: %w", keyPath, err)
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
			rep := verifyReport{Ref: v.Ref(), KeyID: v.KeyID, LayerDigest: v.Layer.Digest.String(), Kind: "release"}
			if a := v.Artifact; a.Host != "" {
				rep.Kind = "values"
				rep.Target = &verifiedTarget{EnvTag: a.EnvTag, Host: a.Host, ServiceID: a.ServiceID, Audience: a.Audience,
					SnapshotID: a.SnapshotID, Release: a.ReleaseVersion, ArtifactDigest: a.ArtifactDigest}
			}
			return report(cmd, rep, rep.text)
		},
	}
	rf.add(cmd)
	outputFlag(cmd)
	cmd.Flags().StringVar(&keyPath, "key", "", "cosign.pub with the trusted public key(s); several PEM blocks for rotation (required)")
	cmd.Flags().StringVar(&identity.Host, "host", "", "expected dev.configpub.host")
	cmd.Flags().StringVar(&identity.ServiceID, "service-id", "", "expected dev.configpub.service-id")
	cmd.Flags().StringVar(&identity.EnvTag, "env-tag", "", "expected dev.configpub.env-tag")
	_ = cmd.MarkFlagRequired("key")
	root.AddCommand(cmd)
}

// verifyReport is what verify-oci prints with --output json.
type verifyReport struct {
	Ref         string          `json:"ref"`         // REPOSITORY@sha256:<hex>, as verified
	Kind        string          `json:"kind"`        // values | release
	KeyID       string          `json:"keyId"`       // the trusted key that verified the signature
	LayerDigest string          `json:"layerDigest"` // digest of the layer checked against the manifest
	Target      *verifiedTarget `json:"target,omitempty"`
}

// verifiedTarget is the identity a values artifact's annotations carry.
type verifiedTarget struct {
	EnvTag         string `json:"envTag"`
	Host           string `json:"host"`
	ServiceID      string `json:"serviceId"`
	Audience       string `json:"audience"`
	SnapshotID     string `json:"snapshotId"`
	Release        int64  `json:"release"`
	ArtifactDigest string `json:"artifactDigest"`
}

func (r verifyReport) text(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "verified %s\nsigned by %s\n", r.Ref, r.KeyID); err != nil {
		return err
	}
	if a := r.Target; a != nil {
		_, err := fmt.Fprintf(w, "target %s/%s/%s audience %s snapshot %s release %d layer %s\n",
			a.EnvTag, a.Host, a.ServiceID, a.Audience, a.SnapshotID, a.Release, a.ArtifactDigest)
		return err
	}
	return nil
}
