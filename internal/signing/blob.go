// Package signing holds configpub's cosign-compatible signature primitives:
// ECDSA P-256 public keys in cosign's PEM format (cosign.pub), blob
// signatures that `cosign verify-blob --key cosign.pub` accepts (ASN.1 DER
// over SHA-256, base64), and key ids ("sha256:" + hex of the public key's
// PKIX DER). It uses only the standard library, so the runtime client can
// verify without cosign; generating and decrypting cosign.key files is in
// internal/cosignkey.
package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/configpub/configpub/internal/digest"
)

// ErrBadSignature is returned when no trusted key verifies a signature.
var ErrBadSignature = errors.New("signature does not verify with any trusted key")

// KeyID returns "sha256:" + hex(SHA-256(PKIX DER of pub)).
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("key id: %w", err)
	}
	return digest.FromBytes(der).String(), nil
}

// SignBlob signs SHA-256(b) with signer (an ECDSA P-256 key) and returns the
// base64 (standard encoding) ASN.1 DER signature, cosign's blob format.
func SignBlob(signer crypto.Signer, b []byte) (string, error) {
	sum := sha256.Sum256(b)
	sig, err := signer.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("sign blob: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// TrustedKey is a public key a verifier accepts, with its key id.
type TrustedKey struct {
	ID  string
	Key *ecdsa.PublicKey
}

// NewTrustedKey wraps an ECDSA public key with its key id.
func NewTrustedKey(pub *ecdsa.PublicKey) (TrustedKey, error) {
	id, err := KeyID(pub)
	if err != nil {
		return TrustedKey{}, err
	}
	return TrustedKey{ID: id, Key: pub}, nil
}

// VerifyBlob checks a base64 ASN.1 ECDSA signature over SHA-256(b) against the
// trusted keys. When keyID is not empty only the key with that id is tried.
// It returns the id of the key that verified.
func VerifyBlob(keys []TrustedKey, b []byte, sigB64, keyID string) (string, error) {
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil {
		return "", fmt.Errorf("verify blob: signature is not base64: %w", err)
	}
	sum := sha256.Sum256(b)
	for _, k := range keys {
		if keyID != "" && k.ID != keyID {
			continue
		}
		if ecdsa.VerifyASN1(k.Key, sum[:], sig) {
			return k.ID, nil
		}
	}
	if keyID != "" {
		return "", fmt.Errorf("verify blob (key %s): %w", keyID, ErrBadSignature)
	}
	return "", fmt.Errorf("verify blob: %w", ErrBadSignature)
}

// ParsePublicKeys parses every "PUBLIC KEY" PEM block in data (a cosign.pub
// file, or several concatenated for rotation). Each must be ECDSA P-256.
func ParsePublicKeys(data []byte) ([]TrustedKey, error) {
	var keys []TrustedKey
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			continue
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse public key: %w", err)
		}
		ec, ok := pub.(*ecdsa.PublicKey)
		if !ok || ec.Curve.Params().Name != "P-256" {
			return nil, fmt.Errorf("parse public key: want an ECDSA P-256 key, got %T", pub)
		}
		k, err := NewTrustedKey(ec)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("parse public key: no PUBLIC KEY PEM block found")
	}
	return keys, nil
}

// MarshalPublicKey returns the PEM "PUBLIC KEY" encoding of pub (cosign.pub).
func MarshalPublicKey(pub *ecdsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
