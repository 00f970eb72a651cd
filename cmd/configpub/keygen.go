package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/signing"
)

func addKeygenCmd(root *cobra.Command) {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out DIR",
		Short: "Write a cosign-compatible key pair (cosign.key encrypted with $COSIGN_PASSWORD, cosign.pub)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			password, err := cosignPassword()
			if err != nil {
				return err
			}
			kp, err := cosignkey.GenerateKeyPair(password)
			if err != nil {
				return err
			}
			privPath, pubPath, err := cosignkey.WriteKeyPair(out, kp)
			if err != nil {
				return err
			}
			keys, err := signing.ParsePublicKeys(kp.PublicPEM)
			if err != nil {
				return err
			}
			rep := keyFilesReport{PrivateKey: privPath, PublicKey: pubPath, KeyID: keys[0].ID}
			return report(cmd, rep, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "wrote %s\nwrote %s\nkey id %s\n", privPath, pubPath, rep.KeyID)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory to write cosign.key and cosign.pub into (required)")
	_ = cmd.MarkFlagRequired("out")
	outputFlag(cmd)
	root.AddCommand(cmd)
}

// keyFilesReport is what keygen and token keygen print with --output json:
// the files written (never their content) and the key's ID.
type keyFilesReport struct {
	PrivateKey string `json:"privateKey"`          // path
	PublicKey  string `json:"publicKey,omitempty"` // path (keygen)
	JWKS       string `json:"jwks,omitempty"`      // path (token keygen)
	KeyID      string `json:"keyId"`
}

// cosignPassword reads $COSIGN_PASSWORD as cosign does; set it to the
// empty string for a key without a password.
func cosignPassword() ([]byte, error) {
	p, ok := os.LookupEnv(cosignkey.PasswordEnv)
	if !ok {
		return nil, errors.New(cosignkey.PasswordEnv + " is not set (set it to the key password, or to the empty string for none)")
	}
	return []byte(p), nil
}
