package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

func addTokenCmd(root *cobra.Command) {
	var key string
	var o auth.MintOptions
	cmd := &cobra.Command{
		Use:   "token --key FILE --issuer ISS --audience AUD --host H --service-id S --env E --config-audience A",
		Short: "Mint a workload JWT for the Config Server (development helper)",
		Long: `Mint an ES256 (or EdDSA/RS256, by key type) workload JWT carrying host, sid,
env and config_audience, signed with a PEM private key. This is a development
and demo helper: production tokens come from the workload identity provider.
Create a key and the JWKS for 'configpub serve --jwks' with 'configpub token keygen'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Mint reads a zero TTL as its default (an hour): the flag given
			// as 0 or negative would mint a token for an hour.
			if o.TTL <= 0 {
				return usageError{fmt.Errorf("--ttl %s: want a positive lifetime", o.TTL)}
			}
			if bundle.Namespace(o.ConfigAudience) == "" {
				return usageError{fmt.Errorf("--config-audience %q: want agent, gateway or knowledge", o.ConfigAudience)}
			}
			signer, err := auth.LoadSigningKey(key)
			if err != nil {
				return err
			}
			tok, err := auth.Mint(signer, o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), tok)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "PEM private signing key (required)")
	f.StringVar(&o.Issuer, "issuer", "", "iss claim (required)")
	f.StringVar(&o.Audience, "audience", "", "aud claim (required)")
	f.StringVar(&o.Host, "host", "", "host claim (required)")
	f.StringVar(&o.ServiceID, "service-id", "", "sid claim (required)")
	f.StringVar(&o.EnvTag, "env-tag", "", "env claim (required)")
	f.StringVar(&o.ConfigAudience, "config-audience", "", "config_audience claim: agent, gateway or knowledge (required)")
	f.StringVar(&o.Subject, "subject", "", "sub claim (default host/serviceId/envTag)")
	f.StringVar(&o.CertThumbprint, "cert-thumbprint", "", "bind to a client certificate: cnf x5t#S256 (base64url SHA-256 of its DER)")
	f.DurationVar(&o.TTL, "ttl", time.Hour, "token lifetime")
	for _, name := range []string{"key", "issuer", "audience", "host", "service-id", "env-tag", "config-audience"} {
		_ = cmd.MarkFlagRequired(name)
	}

	var out string
	keygen := &cobra.Command{
		Use:   "keygen --out DIR",
		Short: "Write a fresh ES256 token-signing key (signing-key.pem) and its JWKS (jwks.json)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			files, err := auth.GenerateKey(out)
			if err != nil {
				return err
			}
			rep := keyFilesReport{PrivateKey: files.PrivateKey, JWKS: files.JWKS, KeyID: files.KeyID}
			return report(cmd, rep, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "wrote %s\nwrote %s\nkid %s\n", files.PrivateKey, files.JWKS, files.KeyID)
				return err
			})
		},
	}
	keygen.Flags().StringVar(&out, "out", "", "directory to write into (required)")
	_ = keygen.MarkFlagRequired("out")
	outputFlag(keygen)
	cmd.AddCommand(keygen)
	root.AddCommand(cmd)
}
