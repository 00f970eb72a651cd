package auth

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

// TestProofOfPossessionTokensAreNotBearerTokens: a token whose cnf claim
// binds it to a proof this server cannot check (DPoP jkt, a jwk, an empty or
// malformed x5t#S256) is refused; an x5t#S256 thumbprint is returned so the
// server can check the client certificate; no cnf is a plain bearer token.
func TestProofOfPossessionTokensAreNotBearerTokens(t *testing.T) {
	key := newKey(t)
	k := keyFor(t, key)
	v := newTestVerifier(t, k)
	hdr := map[string]any{"alg": "ES256", "typ": "JWT", "kid": k.ID}
	sum := sha256.Sum256([]byte("client certificate DER"))
	thumb := b64(sum[:])
	for _, c := range []struct {
		name   string
		cnf    any
		reason string // "" = accepted
	}{
		{"no cnf", nil, ""},
		{"null cnf", "null-json", ""},
		{"x5t#S256 bound", map[string]any{"x5t#S256": thumb}, ""},
		{"DPoP jkt", map[string]any{"jkt": thumb}, "cnf.jkt"},
		{"jkt next to x5t#S256", map[string]any{"jkt": thumb, "x5t#S256": thumb}, "cnf.jkt"},
		{"empty x5t#S256", map[string]any{"x5t#S256": ""}, "x5t#S256"},
		{"short x5t#S256", map[string]any{"x5t#S256": b64(sum[:16])}, "x5t#S256"},
		{"padded x5t#S256", map[string]any{"x5t#S256": thumb + "="}, "x5t#S256"},
		{"numeric x5t#S256", map[string]any{"x5t#S256": 7}, "x5t#S256"},
		{"jwk confirmation", map[string]any{"jwk": map[string]any{"kty": "EC"}}, "other than x5t#S256"},
		{"kid confirmation", map[string]any{"kid": "k1"}, "other than x5t#S256"},
		{"empty cnf", map[string]any{}, "cnf is empty"},
		{"string cnf", "x5t", "not an object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			claims := validClaims()
			switch c.cnf {
			case nil:
			case "null-json":
				claims["cnf"] = nil
			default:
				claims["cnf"] = c.cnf
			}
			got, err := v.Verify(craftES256(t, key, hdr, claims))
			if c.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if want := map[string]any{"x5t#S256": thumb}; c.name == "x5t#S256 bound" && got.CertThumbprint != want["x5t#S256"] {
					t.Errorf("thumbprint %q, want %q", got.CertThumbprint, thumb)
				}
				if c.name != "x5t#S256 bound" && got.CertThumbprint != "" {
					t.Errorf("unbound token has thumbprint %q", got.CertThumbprint)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("got %v, %v; want a refusal mentioning %q", got, err, c.reason)
			}
			if strings.Contains(err.Error(), thumb) {
				t.Errorf("reason echoes a claim value: %v", err)
			}
		})
	}
}
