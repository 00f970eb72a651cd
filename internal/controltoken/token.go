// Package controltoken is the control-plane credential a runtime's status
// and reload endpoints accept: a compact JWS (RFC 7515) signed with ES256
// (RFC 7518, section 3.4: ECDSA P-256, SHA-256, the 64-byte r||s signature) by a
// control-plane key the runtime trusts, kept apart from the key that signs
// delivery manifests. The header is {"alg":"ES256","typ":Type,"kid":key id}
// and the claims name the issuer, the one runtime identity the token is for
// (aud = host/serviceId/envTag), the scope (status or reload), iat, exp and
// a jti. Verification follows RFC 8725: the algorithm and type are fixed,
// the key is chosen by kid among the trusted ones only, the lifetime is at
// most MaxLifetime. It uses the standard library only.
package controltoken

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/strictjson"
)

// Type is the JWS "typ" of a control token.
const Type = "configpub-control+jwt"

// Issuer is the "iss" of every control token.
const Issuer = "configpub-control-plane"

// Scopes: what a token authorizes at a runtime.
const (
	ScopeStatus   = "status"   // GET <status>/status
	ScopeReload   = "reload"   // POST <status>/reload
	ScopePrefetch = "prefetch" // POST <status>/prefetch
)

// MaxLifetime bounds exp - iat of an accepted token.
const MaxLifetime = 5 * time.Minute

// maxTokenBytes bounds a token before it is decoded.
const maxTokenBytes = 4096

// Claims are a control token's claims.
type Claims struct {
	Issuer   string `json:"iss"`
	Audience string `json:"aud"` // the runtime identity, host/serviceId/envTag
	Scope    string `json:"scope"`
	IssuedAt int64  `json:"iat"`
	Expires  int64  `json:"exp"`
	ID       string `json:"jti"`
}

type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid"`
}

// Errors a verification returns (wrapped with the detail).
var (
	ErrMalformed    = errors.New("control token malformed")
	ErrUntrustedKey = errors.New("control token signed by an untrusted key")
	ErrSignature    = errors.New("control token signature invalid")
	ErrExpired      = errors.New("control token expired or not yet valid")
	ErrAudience     = errors.New("control token is for another runtime")
	ErrScope        = errors.New("control token does not grant this scope")
)

// Sign returns a token for audience and scope, valid from now for ttl (at
// most MaxLifetime), signed by signer (an ECDSA P-256 key).
func Sign(signer crypto.Signer, audience, scope string, now time.Time, ttl time.Duration) (string, error) {
	pub, ok := signer.Public().(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return "", errors.New("sign control token: the key is not ECDSA P-256")
	}
	if ttl <= 0 || ttl > MaxLifetime {
		return "", fmt.Errorf("sign control token: lifetime %s not in (0, %s]", ttl, MaxLifetime)
	}
	kid, err := signing.KeyID(pub)
	if err != nil {
		return "", fmt.Errorf("sign control token: %w", err)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("sign control token: %w", err)
	}
	h, _ := json.Marshal(header{Alg: "ES256", Typ: Type, Kid: kid})
	c, _ := json.Marshal(Claims{Issuer: Issuer, Audience: audience, Scope: scope, IssuedAt: now.Unix(),
		Expires: now.Add(ttl).Unix(), ID: hex.EncodeToString(jti[:])})
	input := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(input))
	der, err := signer.Sign(rand.Reader, sum[:], crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("sign control token: %w", err)
	}
	r, s, err := parseDER(der)
	if err != nil {
		return "", fmt.Errorf("sign control token: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig), nil
}

// Verify checks tok against keys (by kid), the clock (with skew), the
// runtime identity audience and the scope, and returns its claims.
func Verify(keys []signing.TrustedKey, tok string, now time.Time, skew time.Duration, audience, scope string) (*Claims, error) {
	if len(tok) > maxTokenBytes {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, maxTokenBytes)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: not three dot-separated parts", ErrMalformed)
	}
	var h header
	if err := decodeJSON(parts[0], &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if h.Alg != "ES256" || h.Typ != Type {
		return nil, fmt.Errorf("%w: alg %q typ %q, want ES256 %s", ErrMalformed, h.Alg, h.Typ, Type)
	}
	var key *ecdsa.PublicKey
	for _, k := range keys {
		if k.ID == h.Kid {
			key = k.Key
		}
	}
	if key == nil {
		return nil, fmt.Errorf("%w: kid %q", ErrUntrustedKey, h.Kid)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return nil, fmt.Errorf("%w: signature is not 64 base64url bytes", ErrMalformed)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(key, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, ErrSignature
	}
	var c Claims
	if err := decodeJSON(parts[1], &c); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrMalformed, err)
	}
	if c.Issuer != Issuer || c.ID == "" || len(c.ID) > 64 {
		return nil, fmt.Errorf("%w: iss %q or jti", ErrMalformed, c.Issuer)
	}
	iat, exp := time.Unix(c.IssuedAt, 0), time.Unix(c.Expires, 0)
	if !exp.After(iat) || exp.Sub(iat) > MaxLifetime {
		return nil, fmt.Errorf("%w: lifetime %s not in (0, %s]", ErrExpired, exp.Sub(iat), MaxLifetime)
	}
	if iat.After(now.Add(skew)) || !now.Add(-skew).Before(exp) {
		return nil, fmt.Errorf("%w: valid [%s, %s), now %s", ErrExpired, iat.UTC().Format(time.RFC3339), exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if c.Audience != audience {
		return nil, fmt.Errorf("%w: aud %q", ErrAudience, c.Audience)
	}
	if c.Scope != scope {
		return nil, fmt.Errorf("%w: scope %q, want %q", ErrScope, c.Scope, scope)
	}
	return &c, nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// decodeJSON decodes one base64url JSON object strictly.
func decodeJSON(part string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return errors.New("not base64url")
	}
	if err := strictjson.Decode(b, v); err != nil {
		return errors.New("not one JSON object of the known members")
	}
	return nil
}

// parseDER splits an ASN.1 ECDSA signature into r and s.
func parseDER(der []byte) (r, s *big.Int, err error) {
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil || len(rest) != 0 || sig.R == nil || sig.S == nil || sig.R.Sign() <= 0 || sig.S.Sign() <= 0 ||
		sig.R.BitLen() > 256 || sig.S.BitLen() > 256 {
		return nil, nil, errors.New("signer returned a malformed ECDSA signature")
	}
	return sig.R, sig.S, nil
}
