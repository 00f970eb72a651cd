package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/configpub/configpub/bundle"
)

// Defaults of Options.
const (
	DefaultLeeway        = 30 * time.Second
	DefaultMaxTokenBytes = 8 << 10
	DefaultCacheSize     = 16384
	maxClaimLen          = 253
)

// Options configures a Verifier. Issuer and Audience are required; every
// other zero value selects the documented default.
type Options struct {
	Issuer   string // required: the exact iss
	Audience string // required: must be among aud
	// Leeway tolerates clock skew on exp, nbf and iat. Default 30 s.
	Leeway time.Duration
	// MaxTokenBytes bounds the raw token before parsing. Default 8 KiB.
	MaxTokenBytes int
	// CacheSize bounds the verified-token cache (entries). Default 16384;
	// negative disables the cache.
	CacheSize int
	// Now returns the current time. Default time.Now.
	Now func() time.Time
	// Operator verifies people's tokens (the operator console) instead of
	// workload tokens: sub is required and the workload claims host, sid,
	// env and config_audience are not. Default false.
	Operator bool
}

// Claims are the verified workload claims of a token. A *Claims returned by
// Verify is shared with the cache and must not be modified.
type Claims struct {
	Subject        string
	Host           string // host
	ServiceID      string // sid
	EnvTag         string // env
	ConfigAudience string // config_audience: agent | gateway | knowledge
	Expiry         time.Time
	NotBefore      time.Time // zero when the token has no nbf
	// CertThumbprint is cnf["x5t#S256"] (RFC 8705): the base64url SHA-256 of
	// the client certificate the token is bound to; empty when unbound.
	CertThumbprint string
	// KeyID is the ID of the configured key that verified the token.
	KeyID string
}

// Identity returns the runtime identity the token grants.
func (c *Claims) Identity() bundle.Identity {
	return bundle.Identity{Host: c.Host, ServiceID: c.ServiceID, EnvTag: c.EnvTag}
}

// Verifier checks bearer tokens against configured keys. It is safe for
// concurrent use.
type Verifier struct {
	keys  KeySource
	opts  Options
	algs  []jose.SignatureAlgorithm
	cache *tokenCache

	cacheHits, verifications atomic.Uint64
}

// CacheStats reports how many tokens were answered from the verified-token
// cache and how many needed a full signature verification.
func (v *Verifier) CacheStats() (hits, verifications uint64) {
	return v.cacheHits.Load(), v.verifications.Load()
}

// NewVerifier returns a Verifier over keys.
func NewVerifier(keys KeySource, opts Options) (*Verifier, error) {
	if keys == nil {
		return nil, errors.New("new verifier: no key source")
	}
	if opts.Issuer == "" {
		return nil, errors.New("new verifier: issuer is required")
	}
	if opts.Audience == "" {
		return nil, errors.New("new verifier: audience is required")
	}
	if opts.Leeway <= 0 {
		opts.Leeway = DefaultLeeway
	}
	if opts.MaxTokenBytes <= 0 {
		opts.MaxTokenBytes = DefaultMaxTokenBytes
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	v := &Verifier{keys: keys, opts: opts, algs: []jose.SignatureAlgorithm{ES256, RS256, EdDSA}}
	if opts.CacheSize > 0 {
		v.cache = newTokenCache(opts.CacheSize)
	}
	return v, nil
}

// unknownKeyWait bounds how long a request waits for the keys to be read
// again for a key id the set lacks.
const unknownKeyWait = 10 * time.Second

const reasonUnknownKeyID = "unknown key id"

// unknownKeyID reports whether err refused a token for naming a key id the
// set lacks, and that id (taken from the token: never logged).
func unknownKeyID(err error) (string, bool) {
	var te *TokenError
	if errors.As(err, &te) && te.Reason == reasonUnknownKeyID {
		return te.kid, true
	}
	return "", false
}

// workloadClaims are the non-registered claims of a workload token.
type workloadClaims struct {
	Host           string          `json:"host"`
	ServiceID      string          `json:"sid"`
	EnvTag         string          `json:"env"`
	ConfigAudience string          `json:"config_audience"`
	Confirmation   json.RawMessage `json:"cnf"`
}

// forbiddenHeaders (with jwk and x5c) would point a naive verifier at a key
// of the token's choosing; a token carrying any of them is refused outright.
var forbiddenHeaders = []jose.HeaderKey{"jku", "x5u"}

// Verify checks raw (the token without "Bearer ") and returns its claims.
// Every failure wraps ErrInvalidToken in a *TokenError.
func (v *Verifier) Verify(raw string) (*Claims, error) {
	if raw == "" {
		return nil, tokenError("missing")
	}
	if len(raw) > v.opts.MaxTokenBytes {
		return nil, tokenError(fmt.Sprintf("longer than %d bytes", v.opts.MaxTokenBytes))
	}
	now := v.opts.Now()
	set := v.keys.KeySet()
	if v.cache != nil {
		if c, ok := v.cache.get(raw, set.Generation, now, v.opts.Leeway); ok {
			v.cacheHits.Add(1)
			return c, nil
		}
	}
	v.verifications.Add(1)
	c, err := v.verify(raw, set, now)
	if kid, unknown := unknownKeyID(err); unknown {
		// A key the issuer may have published since the last read.
		if r, ok := v.keys.(UnknownKeyRefresher); ok {
			ctx, cancel := context.WithTimeout(context.Background(), unknownKeyWait)
			refreshed := r.RefreshForUnknownKey(ctx, kid)
			cancel()
			if refreshed {
				set = v.keys.KeySet()
				c, err = v.verify(raw, set, now)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if v.cache != nil {
		v.cache.put(raw, c, set.Generation, now)
	}
	return c, nil
}

// Trusts reports whether the current key set still holds the key with ID
// keyID (Claims.KeyID): a request held since its token was verified is
// answered only while it does.
func (v *Verifier) Trusts(keyID string) bool {
	for _, k := range v.keys.KeySet().Keys {
		if k.ID == keyID {
			return true
		}
	}
	return false
}

func (v *Verifier) verify(raw string, set *KeySet, now time.Time) (*Claims, error) {
	tok, err := jwt.ParseSigned(raw, v.algs)
	if err != nil {
		return nil, tokenError("malformed or algorithm not allowed")
	}
	if len(tok.Headers) != 1 {
		return nil, tokenError("not exactly one signature")
	}
	h := tok.Headers[0]
	if h.JSONWebKey != nil {
		return nil, tokenError("header jwk not accepted")
	}
	if _, err := h.Certificates(x509.VerifyOptions{}); !errors.Is(err, jose.ErrMissingX5cHeader) {
		return nil, tokenError("header x5c not accepted")
	}
	for _, k := range forbiddenHeaders {
		if _, ok := h.ExtraHeaders[k]; ok {
			return nil, tokenError("header " + string(k) + " not accepted")
		}
	}
	var std jwt.Claims
	var wc workloadClaims
	verified, kidKnown, critical := false, h.KeyID == "", false
	var keyID string
	for _, k := range set.Keys {
		if h.KeyID != "" && k.ID != h.KeyID {
			continue
		}
		kidKnown = true
		if string(k.Algorithm) != h.Algorithm {
			continue
		}
		// The signature first, then the claims: a token its issuer signed
		// with malformed claims is not a signature failure (an operator
		// would go and check the keys).
		err := tok.Claims(k.Public)
		if err == nil {
			verified, keyID = true, k.ID
			break
		}
		critical = critical || errors.Is(err, jose.ErrUnsupportedCriticalHeader)
	}
	switch {
	case !kidKnown:
		return nil, &TokenError{Reason: reasonUnknownKeyID, kid: h.KeyID}
	case !verified && critical:
		return nil, tokenError("header crit names an extension this server does not understand")
	case !verified:
		return nil, tokenError("signature does not verify with any configured key for its algorithm")
	}
	if err := tok.UnsafeClaimsWithoutVerification(&std, &wc); err != nil { // verified above
		return nil, tokenError(malformedClaims(err))
	}
	if std.Expiry == nil {
		return nil, tokenError("claim exp missing")
	}
	err = std.ValidateWithLeeway(jwt.Expected{
		Issuer:      v.opts.Issuer,
		AnyAudience: jwt.Audience{v.opts.Audience},
		Time:        now,
	}, v.opts.Leeway)
	if err != nil {
		return nil, tokenError(claimReason(err))
	}
	if v.opts.Operator {
		if std.Subject == "" || len(std.Subject) > maxClaimLen {
			return nil, tokenError("claim sub missing or too long")
		}
		return &Claims{Subject: std.Subject, Expiry: std.Expiry.Time(), KeyID: keyID}, nil
	}
	for _, f := range []struct{ name, val string }{
		{"host", wc.Host}, {"sid", wc.ServiceID}, {"env", wc.EnvTag}, {"config_audience", wc.ConfigAudience},
	} {
		if f.val == "" {
			return nil, tokenError("claim " + f.name + " missing")
		}
		if len(f.val) > maxClaimLen {
			return nil, tokenError("claim " + f.name + " too long")
		}
	}
	if bundle.Namespace(wc.ConfigAudience) == "" {
		return nil, tokenError("claim config_audience is not agent, gateway or knowledge")
	}
	thumb, err := confirmation(wc.Confirmation)
	if err != nil {
		return nil, err
	}
	c := &Claims{
		Subject:        std.Subject,
		Host:           wc.Host,
		ServiceID:      wc.ServiceID,
		EnvTag:         wc.EnvTag,
		ConfigAudience: wc.ConfigAudience,
		Expiry:         std.Expiry.Time(),
		CertThumbprint: thumb,
		KeyID:          keyID,
	}
	if std.NotBefore != nil {
		c.NotBefore = std.NotBefore.Time()
	}
	return c, nil
}

// confirmation checks the cnf claim (RFC 7800) and returns the certificate
// thumbprint a token is bound to, "" for an unbound token. A token bound to a
// proof of possession this server cannot check is not a plain bearer token:
// cnf.jkt (DPoP, RFC 9449), jwk, jwe, jku, kid or any other method is
// refused, and so is an empty cnf or an x5t#S256 (RFC 8705) that is empty
// or not the base64url SHA-256 of a certificate. A present x5t#S256 binds
// the token to the client certificate, checked by the server on every
// request.
func confirmation(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var cnf map[string]json.RawMessage
	if err := json.Unmarshal(raw, &cnf); err != nil {
		return "", tokenError("claim cnf is not an object")
	}
	if len(cnf) == 0 {
		return "", tokenError("claim cnf is empty: a bound token must name its confirmation method")
	}
	if _, ok := cnf["jkt"]; ok {
		return "", tokenError("claim cnf.jkt: a DPoP-bound token is not accepted as a bearer token")
	}
	for k := range cnf {
		if k != "x5t#S256" {
			return "", tokenError("claim cnf holds a confirmation method other than x5t#S256: a proof-of-possession token is not accepted as a bearer token")
		}
	}
	var thumb string
	if err := json.Unmarshal(cnf["x5t#S256"], &thumb); err != nil {
		return "", tokenError("claim cnf x5t#S256 is not a string")
	}
	if b, err := base64.RawURLEncoding.DecodeString(thumb); err != nil || len(b) != sha256.Size {
		return "", tokenError("claim cnf x5t#S256 is empty or not a base64url SHA-256 thumbprint")
	}
	return thumb, nil
}

func claimReason(err error) string {
	switch {
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return "claim iss does not match"
	case errors.Is(err, jwt.ErrInvalidAudience):
		return "claim aud does not match"
	case errors.Is(err, jwt.ErrExpired):
		return "expired"
	case errors.Is(err, jwt.ErrNotValidYet):
		return "not yet valid"
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return "claim iat in the future"
	default:
		return "claims invalid"
	}
}

// malformedClaims is the reason of a verified token whose claims could not
// be read, never showing a claim's value.
func malformedClaims(err error) string {
	if strings.Contains(err.Error(), "duplicate key") {
		return "signature verifies but a claim is given twice"
	}
	return "signature verifies but the claims are malformed (a claim of the wrong type, or not a JSON object)"
}
