package client

import (
	"crypto/ecdsa"
	"fmt"

	"github.com/configpub/configpub/internal/signing"
)

// TrustedKey is a public key whose delivery-manifest signatures the client
// accepts: an ECDSA P-256 key (cosign's) with its key id, "sha256:" + hex of
// the key's PKIX DER (what the Config Server sends as X-Manifest-Key-Id).
// Build one with ParseTrustedKeys or NewTrustedKey.
type TrustedKey = signing.TrustedKey

// ParseTrustedKeys parses a cosign.pub file: every "PUBLIC KEY" PEM block in
// pem, several of them concatenated while a key is rotated. Each must be an
// ECDSA P-256 key.
func ParseTrustedKeys(pem []byte) ([]TrustedKey, error) {
	keys, err := signing.ParsePublicKeys(pem)
	if err != nil {
		return nil, fmt.Errorf("trusted keys: %w", err)
	}
	return keys, nil
}

// NewTrustedKey wraps an ECDSA P-256 public key with its key id.
func NewTrustedKey(pub *ecdsa.PublicKey) (TrustedKey, error) {
	if pub == nil || pub.Curve == nil || pub.Curve.Params().Name != "P-256" {
		return TrustedKey{}, fmt.Errorf("trusted key: want an ECDSA P-256 public key")
	}
	k, err := signing.NewTrustedKey(pub)
	if err != nil {
		return TrustedKey{}, fmt.Errorf("trusted key: %w", err)
	}
	return k, nil
}
