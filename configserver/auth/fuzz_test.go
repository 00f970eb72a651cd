package auth

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParseKeys: whatever a key file or JWKS document holds, every key
// ParseKeys returns is a public key of a kind it supports, under the one
// algorithm that kind verifies (ES256 on P-256, RS256 of at least 2048
// bits, EdDSA), with an ID; and reading the same bytes twice gives the
// same keys.
func FuzzParseKeys(f *testing.F) {
	ec := newKey(f)
	ecJWK := func(extra string) []byte {
		return []byte(`{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","x":"` + ecX(f, ec) + `","y":"` + ecY(f, ec) + `"` + extra + `}]}`)
	}
	f.Add(ecJWK(""))
	f.Add(ecJWK(`,"alg":"ES256","use":"sig"`))
	f.Add(ecJWK(`,"alg":"RS256"`))
	f.Add(ecJWK(`,"use":"enc"`))
	d, err := ec.Bytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ecJWK(`,"d":"` + b64(d) + `"`))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"sXch","e":"AQAB"}]}`))
	f.Add([]byte("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseKeys("fuzz", data)
		if err != nil {
			return
		}
		for i, k := range keys {
			if k.ID == "" {
				t.Fatalf("key %d has no ID", i)
			}
			if _, private := k.Public.(crypto.Signer); private {
				t.Fatalf("key %d (%s) is a private key", i, k.ID)
			}
			alg, err := algorithmFor(k.Public)
			if err != nil || alg != k.Algorithm || !supportedAlg(alg) {
				t.Fatalf("key %d (%s): algorithm %s for a %s key (%v)", i, k.ID, k.Algorithm, keyKind(k.Public), err)
			}
			if r, ok := k.Public.(*rsa.PublicKey); ok && (r.N.BitLen() < minRSABits || r.E < 3 || r.E%2 == 0) {
				t.Fatalf("key %d (%s): RSA key of %d bits, exponent %d", i, k.ID, r.N.BitLen(), r.E)
			}
		}
		again, err := ParseKeys("fuzz", data)
		if err != nil || !reflect.DeepEqual(again, keys) {
			t.Fatalf("a second read gives %v (%v)", again, err)
		}
	})
}

// FuzzVerifyToken: a token string is accepted only as signed. Mutating a
// signed token never yields an accepted token whose header or claims
// differ from the signed ones (base64url's spare bits aside, the accepted
// token decodes to exactly what was signed), and a refusal is always a
// *TokenError.
func FuzzVerifyToken(f *testing.F) {
	key := newKey(f)
	signed := map[string]bool{}
	for _, claims := range []map[string]any{
		validClaims(),
		with(validClaims(), "cnf", map[string]any{"x5t#S256": b64(bytes.Repeat([]byte{7}, 32))}),
		with(validClaims(), "aud", []string{"other", testAudience}),
		with(validClaims(), "exp", testNow.Add(-time.Hour).Unix()),
	} {
		tok := craftES256(f, key, map[string]any{"alg": "ES256", "kid": keyFor(f, key).ID}, claims)
		f.Add(tok)
		parts := strings.Split(tok, ".")
		signed[parts[0]+"."+parts[1]] = true
	}
	v := newTestVerifier(f, keyFor(f, key))
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := v.Verify(raw)
		if err != nil {
			if _, ok := err.(*TokenError); !ok {
				t.Fatalf("refusal is %T: %v", err, err)
			}
			return
		}
		parts := strings.Split(raw, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted %q of %d parts", raw, len(parts))
		}
		h, err1 := base64.RawURLEncoding.DecodeString(parts[0])
		p, err2 := base64.RawURLEncoding.DecodeString(parts[1])
		if err1 != nil || err2 != nil || !signed[b64(h)+"."+b64(p)] {
			t.Fatalf("accepted a token that was never signed: %q (claims %+v)", raw, c)
		}
	})
}

// FuzzVerifyClaims: whatever the claims of a token its issuer signed, an
// accepted token grants exactly the identity its claims name (as a
// case-sensitive JSON reader reads them), for this issuer and audience,
// unexpired, with a certificate binding that is a base64url SHA-256.
func FuzzVerifyClaims(f *testing.F) {
	key := newKey(f)
	kid := keyFor(f, key).ID
	for _, claims := range []map[string]any{
		validClaims(),
		with(validClaims(), "cnf", map[string]any{"x5t#S256": b64(bytes.Repeat([]byte{7}, 32))}),
		with(validClaims(), "cnf", map[string]any{"jkt": "x"}),
		with(validClaims(), "HOST", "other.example"),
		with(validClaims(), "config_audience", "gateway", "nbf", nil, "iat", nil),
		with(validClaims(), "exp", nil),
	} {
		f.Add(mustJSON(f, claims))
	}
	f.Add([]byte(`{"iss":"https://issuer.test","aud":"configpub","exp":4102444800,"host":"a","host":"b","sid":"s","env":"e","config_audience":"agent"}`))
	v := newTestVerifier(f, keyFor(f, key))
	f.Fuzz(func(t *testing.T, payload []byte) {
		c, err := v.Verify(craftES256Payload(t, key, map[string]any{"alg": "ES256", "kid": kid}, payload))
		if err != nil {
			if _, ok := err.(*TokenError); !ok {
				t.Fatalf("refusal is %T: %v", err, err)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatalf("accepted claims that are not a JSON object: %v", err)
		}
		for name, got := range map[string]string{"host": c.Host, "sid": c.ServiceID, "env": c.EnvTag, "config_audience": c.ConfigAudience} {
			if want, _ := m[name].(string); got != want || got == "" || len(got) > maxClaimLen {
				t.Fatalf("claim %s granted as %q, the token says %q", name, got, want)
			}
		}
		if m["iss"] != testIssuer {
			t.Fatalf("accepted issuer %v", m["iss"])
		}
		if c.Expiry.IsZero() || !c.Expiry.After(testNow.Add(-DefaultLeeway)) {
			t.Fatalf("accepted expiry %s at %s", c.Expiry, testNow)
		}
		if c.CertThumbprint != "" {
			b, err := base64.RawURLEncoding.DecodeString(c.CertThumbprint)
			if err != nil || len(b) != 32 || b64(b) != c.CertThumbprint {
				t.Fatalf("accepted certificate binding %q", c.CertThumbprint)
			}
		}
	})
}
