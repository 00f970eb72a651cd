package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/configpub/configpub/internal/atomicfile"
)

// MintOptions describes a development workload token. Issuer, Audience,
// Host, ServiceID, EnvTag and ConfigAudience are required.
type MintOptions struct {
	Issuer, Audience, Subject               string
	Host, ServiceID, EnvTag, ConfigAudience string
	// TTL is the token lifetime. Default 1 hour.
	TTL time.Duration
	// Now is the issue time. Default time.Now().
	Now time.Time
	// CertThumbprint, when set, binds the token to a client certificate
	// (cnf["x5t#S256"], RFC 8705).
	CertThumbprint string
}

// Mint signs a workload JWT with key (ECDSA P-256 -> ES256, Ed25519 -> EdDSA,
// RSA -> RS256); the kid header is the key's RFC 7638 thumbprint. It is a
// development helper: production tokens come from the workload identity
// provider.
func Mint(key crypto.Signer, opts MintOptions) (string, error) {
	for _, f := range []struct{ name, val string }{
		{"issuer", opts.Issuer}, {"audience", opts.Audience}, {"host", opts.Host},
		{"service id", opts.ServiceID}, {"env tag", opts.EnvTag}, {"config audience", opts.ConfigAudience},
	} {
		if f.val == "" {
			return "", fmt.Errorf("mint token: %s is required", f.name)
		}
	}
	alg, err := algorithmFor(key.Public())
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	kid, err := Thumbprint(key.Public())
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	if opts.TTL <= 0 {
		opts.TTL = time.Hour
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	sub := opts.Subject
	if sub == "" {
		sub = opts.Host + "/" + opts.ServiceID + "/" + opts.EnvTag
	}
	std := jwt.Claims{
		Issuer:    opts.Issuer,
		Subject:   sub,
		Audience:  jwt.Audience{opts.Audience},
		IssuedAt:  jwt.NewNumericDate(opts.Now),
		NotBefore: jwt.NewNumericDate(opts.Now),
		Expiry:    jwt.NewNumericDate(opts.Now.Add(opts.TTL)),
	}
	wc := workloadClaims{Host: opts.Host, ServiceID: opts.ServiceID, EnvTag: opts.EnvTag, ConfigAudience: opts.ConfigAudience}
	if opts.CertThumbprint != "" {
		cnf, err := json.Marshal(map[string]string{"x5t#S256": opts.CertThumbprint})
		if err != nil {
			return "", fmt.Errorf("mint token: cnf: %w", err)
		}
		wc.Confirmation = cnf
	}
	tok, err := jwt.Signed(signer).Claims(std).Claims(wc).Serialize()
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return tok, nil
}

// LoadSigningKey reads a PEM private key ("PRIVATE KEY" PKCS#8 or
// "EC PRIVATE KEY") usable with Mint.
func LoadSigningKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read signing key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("signing key %s: no PEM block", path)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("signing key %s: PEM block %q, want PRIVATE KEY", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey, ed25519.PrivateKey, *rsa.PrivateKey:
		return k.(crypto.Signer), nil
	default:
		return nil, fmt.Errorf("signing key %s: unsupported key type %T", path, key)
	}
}

// KeyFiles names the files GenerateKey wrote.
type KeyFiles struct {
	PrivateKey string // PKCS#8 PEM, mode 0600
	JWKS       string // the public JWKS for `configpub serve --jwks`
	KeyID      string
}

// GenerateKey creates a fresh ECDSA P-256 token-signing key in dir and writes
// it (signing-key.pem) with its public JWKS (jwks.json), each atomically,
// removing the key again when the JWKS cannot be written. It refuses to
// overwrite an existing key.
func GenerateKey(dir string) (*KeyFiles, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	kid, err := Thumbprint(key.Public())
	if err != nil {
		return nil, err
	}
	jwks, err := json.MarshalIndent(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: key.Public(), KeyID: kid, Algorithm: string(ES256), Use: "sig",
	}}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	files := &KeyFiles{
		PrivateKey: filepath.Join(dir, "signing-key.pem"),
		JWKS:       filepath.Join(dir, "jwks.json"),
		KeyID:      kid,
	}
	if _, err := os.Stat(files.PrivateKey); err == nil {
		return nil, fmt.Errorf("generate key: %s already exists", files.PrivateKey)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	if err := atomicfile.Write(files.PrivateKey, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(files.JWKS, append(jwks, '\n'), 0o644); err != nil {
		// A key without its JWKS is half a pair that the next run refuses
		// to overwrite: remove it.
		if rerr := os.Remove(files.PrivateKey); rerr != nil {
			return nil, fmt.Errorf("generate key: %w (and %s, written first, could not be removed: %v)", err, files.PrivateKey, rerr)
		}
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return files, nil
}
