package main

import (
	"fmt"
	"os"

	"github.com/configpub/configpub/internal/webflow"
)

// signedByKeyring reads --require-signed-by: "github" selects GitHub's
// web-flow keys shipped with configpub (checked against their published
// fingerprints); anything else is an armored OpenPGP keyring file.
func signedByKeyring(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if v == webflow.Name {
		k, err := webflow.Keyring()
		if err != nil {
			return "", fmt.Errorf("--require-signed-by %s: %w", v, err)
		}
		return k, nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return "", fmt.Errorf("--require-signed-by: %w (or use --require-signed-by %s for GitHub's web-flow keys)", err, webflow.Name)
	}
	return string(b), nil
}
