package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

// Algorithms a configured key may be fixed to. HMAC and "none" are not
// among them and cannot be configured.
const (
	ES256 = jose.ES256
	RS256 = jose.RS256
	EdDSA = jose.EdDSA
)

// minRSABits is the smallest RSA modulus accepted for verification.
const minRSABits = 2048

// Key is one configured verification key with the one algorithm it may be
// used with.
type Key struct {
	// ID is the key id a token's kid header must name to select this key.
	// Keys read from PEM get their RFC 7638 JWK thumbprint (base64url).
	ID        string
	Algorithm jose.SignatureAlgorithm
	Public    crypto.PublicKey
}

// KeySet is an immutable set of verification keys. Generation changes
// whenever a key source replaces its set, which invalidates cached tokens.
type KeySet struct {
	Keys       []Key
	Generation uint64
}

// KeySource yields the current key set. Implementations must be safe for
// concurrent use and must never fetch keys because a token asks for it.
type KeySource interface {
	KeySet() *KeySet
}

// StaticKeys is a KeySource with a fixed key set.
type StaticKeys struct{ set *KeySet }

// NewStaticKeys returns a KeySource that always yields keys.
func NewStaticKeys(keys []Key) *StaticKeys {
	return &StaticKeys{set: &KeySet{Keys: keys, Generation: 1}}
}

// KeySet returns the fixed set.
func (s *StaticKeys) KeySet() *KeySet { return s.set }

// LoadKeyFile reads verification keys from a file: a JWKS document (JSON) or
// one or more PEM "PUBLIC KEY" blocks.
func LoadKeyFile(path string) ([]Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	return ParseKeys(path, data)
}

// ParseKeys parses a JWKS document or PEM public keys; source names the
// origin in errors.
func ParseKeys(source string, data []byte) ([]Key, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return ParseJWKS(source, trimmed)
	}
	return parsePEM(source, data)
}

// ParseJWKS parses a JSON Web Key Set. Keys whose "use" is not "sig", or
// whose "alg" names an algorithm other than ES256, RS256 or EdDSA, are
// skipped (they are meant for other consumers). A symmetric key, a key whose
// type contradicts its "alg", or an RSA key under 2048 bits is an error.
// Private keys are reduced to their public half.
func ParseJWKS(source string, data []byte) ([]Key, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("key source %s: not a JWKS document: %w", source, err)
	}
	var keys []Key
	for i, rk := range raw.Keys {
		var jwk jose.JSONWebKey
		if err := jwk.UnmarshalJSON(rk); err != nil {
			return nil, &KeyError{Source: source, Index: i, Err: err}
		}
		if jwk.Use != "" && jwk.Use != "sig" {
			continue
		}
		if jwk.Algorithm != "" && !supportedAlg(jose.SignatureAlgorithm(jwk.Algorithm)) {
			continue
		}
		pub := jwk.Key
		if signer, ok := pub.(crypto.Signer); ok {
			pub = signer.Public()
		}
		alg, err := algorithmFor(pub)
		if err != nil {
			return nil, &KeyError{Source: source, Index: i, KeyID: jwk.KeyID, Err: err}
		}
		if jwk.Algorithm != "" && jose.SignatureAlgorithm(jwk.Algorithm) != alg {
			return nil, &KeyError{Source: source, Index: i, KeyID: jwk.KeyID,
				Err: fmt.Errorf("alg %s does not fit a %s key", jwk.Algorithm, keyKind(pub))}
		}
		id := jwk.KeyID
		if id == "" {
			if id, err = Thumbprint(pub); err != nil {
				return nil, &KeyError{Source: source, Index: i, Err: err}
			}
		}
		keys = append(keys, Key{ID: id, Algorithm: alg, Public: pub})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("key source %s: %w", source, ErrNoKeys)
	}
	return keys, nil
}

func parsePEM(source string, data []byte) ([]Key, error) {
	var keys []Key
	rest := data
	for i := 0; ; i++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, &KeyError{Source: source, Index: i,
				Err: fmt.Errorf("PEM block %q, want PUBLIC KEY", block.Type)}
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, &KeyError{Source: source, Index: i, Err: err}
		}
		alg, err := algorithmFor(pub)
		if err != nil {
			return nil, &KeyError{Source: source, Index: i, Err: err}
		}
		id, err := Thumbprint(pub)
		if err != nil {
			return nil, &KeyError{Source: source, Index: i, Err: err}
		}
		keys = append(keys, Key{ID: id, Algorithm: alg, Public: pub})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("key source %s: no PEM PUBLIC KEY block or JWKS document: %w", source, ErrNoKeys)
	}
	return keys, nil
}

// algorithmFor fixes the one algorithm a public key may verify.
func algorithmFor(pub crypto.PublicKey) (jose.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("ECDSA curve %s is not supported, want P-256", k.Curve.Params().Name)
		}
		return ES256, nil
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return "", fmt.Errorf("RSA key of %d bits, want at least %d", k.N.BitLen(), minRSABits)
		}
		return RS256, nil
	case ed25519.PublicKey:
		return EdDSA, nil
	case []byte:
		return "", errors.New("symmetric keys are never accepted for token verification")
	default:
		return "", fmt.Errorf("unsupported key type %T", pub)
	}
}

func supportedAlg(a jose.SignatureAlgorithm) bool {
	return a == ES256 || a == RS256 || a == EdDSA
}

func keyKind(pub crypto.PublicKey) string {
	switch pub.(type) {
	case *ecdsa.PublicKey:
		return "ECDSA"
	case *rsa.PublicKey:
		return "RSA"
	case ed25519.PublicKey:
		return "Ed25519"
	default:
		return fmt.Sprintf("%T", pub)
	}
}

// Thumbprint returns the RFC 7638 SHA-256 JWK thumbprint of pub, base64url
// without padding; it is the kid of keys read from PEM and of minted tokens.
func Thumbprint(pub crypto.PublicKey) (string, error) {
	jwk := jose.JSONWebKey{Key: pub}
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}
