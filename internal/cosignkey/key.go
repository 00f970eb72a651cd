// Package cosignkey reads and writes cosign key pairs: ECDSA P-256 keys with
// the private key encrypted as cosign does (scrypt + secretbox, "ENCRYPTED
// SIGSTORE PRIVATE KEY" PEM), generated and decrypted with cosign's own code.
// It is the only package of configpub that imports cosign; verification
// (package signing) needs only the standard library, so runtimes that embed
// the client do not carry cosign's dependencies.
package cosignkey

import (
	"crypto"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sigstore/cosign/v2/pkg/cosign"

	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/signing"
)

// File names cosign uses for a key pair (`cosign generate-key-pair`).
const (
	PrivateKeyFile = "cosign.key"
	PublicKeyFile  = "cosign.pub"
)

// PasswordEnv is the environment variable cosign reads the private key
// password from. Libraries take the password as bytes; the CLI reads it.
const PasswordEnv = "COSIGN_PASSWORD"

// ErrKeyExists is returned by WriteKeyPair when a key file is already present.
var ErrKeyExists = errors.New("key file already exists")

// ErrBadPrivateKey is returned when a cosign.key cannot be decrypted or is
// not an ECDSA P-256 key.
var ErrBadPrivateKey = errors.New("cannot load private key")

// KeyPair is a cosign-compatible key pair: an encrypted PKCS #8 private key
// ("ENCRYPTED SIGSTORE PRIVATE KEY" PEM, scrypt + secretbox, as written by
// `cosign generate-key-pair`) and a PKIX "PUBLIC KEY" PEM.
type KeyPair struct {
	PrivatePEM []byte
	PublicPEM  []byte
}

// GenerateKeyPair makes a new ECDSA P-256 key pair with cosign's generator
// and encrypts the private key with password (which may be empty, as
// cosign allows).
func GenerateKeyPair(password []byte) (*KeyPair, error) {
	kb, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return password, nil })
	if err != nil {
		return nil, fmt.Errorf("generate key pair: %w", err)
	}
	return &KeyPair{PrivatePEM: kb.PrivateBytes, PublicPEM: kb.PublicBytes}, nil
}

// WriteKeyPair writes kp as DIR/cosign.key (mode 0600) and DIR/cosign.pub
// (mode 0644), each atomically (temp file, fsync, rename), and removes
// cosign.key again when cosign.pub cannot be written. It refuses to
// overwrite existing files (ErrKeyExists), like cosign does without a
// prompt. It returns the two paths.
func WriteKeyPair(dir string, kp *KeyPair) (privPath, pubPath string, err error) {
	privPath = filepath.Join(dir, PrivateKeyFile)
	pubPath = filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("write key pair: %s: %w", p, ErrKeyExists)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("write key pair: %w", err)
	}
	if err := atomicfile.Write(privPath, kp.PrivatePEM, 0o600); err != nil {
		return "", "", err
	}
	if err := atomicfile.Write(pubPath, kp.PublicPEM, 0o644); err != nil {
		// A private key without its public key is half a pair that the
		// next run refuses to overwrite: remove it.
		if rerr := os.Remove(privPath); rerr != nil {
			return "", "", fmt.Errorf("write key pair: %w (and %s, written first, could not be removed: %v)", err, privPath, rerr)
		}
		return "", "", fmt.Errorf("write key pair: %w", err)
	}
	return privPath, pubPath, nil
}

// Signer is a loaded cosign private key. It implements crypto.Signer, so
// signing.SignBlob accepts it; decrypting a cosign key is deliberately slow
// (scrypt), so load it once and reuse the Signer.
type Signer struct {
	signer crypto.Signer
	pub    *ecdsa.PublicKey
	keyID  string
}

var _ crypto.Signer = (*Signer)(nil)

// LoadPrivateKey decrypts a cosign.key PEM ("ENCRYPTED SIGSTORE PRIVATE
// KEY" or the older "ENCRYPTED COSIGN PRIVATE KEY") with password, using
// cosign's own loader. The key must be ECDSA P-256.
func LoadPrivateKey(pemBytes, password []byte) (*Signer, error) {
	sv, err := cosign.LoadPrivateKey(pemBytes, password, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPrivateKey, err)
	}
	cs, ok := sv.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: %T is not a crypto.Signer", ErrBadPrivateKey, sv)
	}
	pub, ok := cs.Public().(*ecdsa.PublicKey)
	if !ok || pub.Curve.Params().Name != "P-256" {
		return nil, fmt.Errorf("%w: want an ECDSA P-256 key, got %T", ErrBadPrivateKey, cs.Public())
	}
	id, err := signing.KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &Signer{signer: cs, pub: pub, keyID: id}, nil
}

// LoadPrivateKeyFile reads and decrypts the cosign.key at path.
func LoadPrivateKeyFile(path string, password []byte) (*Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load private key: %w", err)
	}
	s, err := LoadPrivateKey(b, password)
	if err != nil {
		return nil, fmt.Errorf("load private key %s: %w", path, err)
	}
	return s, nil
}

// Public returns the *ecdsa.PublicKey of the signer.
func (s *Signer) Public() crypto.PublicKey { return s.pub }

// PublicKey returns the ECDSA public key.
func (s *Signer) PublicKey() *ecdsa.PublicKey { return s.pub }

// KeyID returns "sha256:" + hex of the public key's PKIX DER.
func (s *Signer) KeyID() string { return s.keyID }

// TrustedKey returns the signer's public key as a TrustedKey.
func (s *Signer) TrustedKey() signing.TrustedKey {
	return signing.TrustedKey{ID: s.keyID, Key: s.pub}
}

// Sign signs digest (a SHA-256 sum) and returns an ASN.1 DER signature.
func (s *Signer) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	return s.signer.Sign(rand, digest, opts)
}
