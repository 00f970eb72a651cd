package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/promoter"
)

// newDBKeysCmd is `configpub db keys`: the public keys the store has
// signed with (configpub.signing_key).
func newDBKeysCmd() *cobra.Command {
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "keys [--database URL]",
		Short: "List the public keys the release store has signed with",
		Long: `keys lists the public keys the release store has signed delivery manifests
and artifacts with, as it recorded them the first time it signed with each
(configpub.signing_key): key id, algorithm, and when it first and last signed
with it, oldest first. With -o json each key also carries its public key as a
PEM block, the cosign.pub a runtime or verify-oci trusts.

Before and after a key rotation it shows which keys the store still signs
with: a key whose last use is older than the longest lease (delivery
expiresAfter) signs no lease a runtime still holds. A key last used before the
store recorded keys is listed from its next use on. Run it as the promoter's
database user; it reads only.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			keys, err := store.SigningKeys(ctx)
			if err != nil {
				return err
			}
			rep, err := newKeysReport(keys)
			if err != nil {
				return err
			}
			return report(cmd, rep, rep.text)
		},
	}
	sf.add(cmd, false)
	outputFlag(cmd)
	return cmd
}

// keysReport is what db keys prints with --output json.
type keysReport struct {
	SigningKeys []signingKeyReport `json:"signingKeys"` // oldest first use first; empty, never null, when none is recorded
}

// signingKeyReport is one recorded signing key.
type signingKeyReport struct {
	KeyID       string `json:"keyId"`       // sha256: of the PKIX DER public key
	Algorithm   string `json:"algorithm"`   // ecdsa-p256-sha256
	FirstUsedAt string `json:"firstUsedAt"` // RFC 3339, UTC: when the store first set out to sign with it
	LastUsedAt  string `json:"lastUsedAt"`  // RFC 3339, UTC: when it last did
	PublicKey   string `json:"publicKey"`   // PKIX "PUBLIC KEY" PEM, as cosign.pub holds it
}

func newKeysReport(keys []promoter.SigningKey) (keysReport, error) {
	rep := keysReport{SigningKeys: []signingKeyReport{}}
	for _, k := range keys {
		der, err := x509.MarshalPKIXPublicKey(k.Key)
		if err != nil {
			return keysReport{}, fmt.Errorf("signing key %s: %w", k.ID, err)
		}
		rep.SigningKeys = append(rep.SigningKeys, signingKeyReport{
			KeyID: k.ID, Algorithm: k.Algorithm,
			FirstUsedAt: k.FirstUsed.UTC().Format(time.RFC3339), LastUsedAt: k.LastUsed.UTC().Format(time.RFC3339),
			PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
		})
	}
	return rep, nil
}

func (r keysReport) text(w io.Writer) error {
	if len(r.SigningKeys) == 0 {
		_, err := io.WriteString(w, "no signing key recorded: the store has not signed since it was migrated to record keys\n")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY ID\tALGORITHM\tFIRST USED\tLAST USED")
	for _, k := range r.SigningKeys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.KeyID, k.Algorithm, k.FirstUsedAt, k.LastUsedAt)
	}
	return tw.Flush()
}
