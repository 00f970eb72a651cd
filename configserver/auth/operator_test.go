package auth

import (
	"errors"
	"testing"
	"time"
)

func TestVerifyOperatorTokens(t *testing.T) {
	k := newKey(t)
	v, err := NewVerifier(NewStaticKeys([]Key{keyFor(t, k)}), Options{
		Issuer: testIssuer, Audience: testAudience, Now: func() time.Time { return testNow }, Operator: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]any{"alg": "ES256", "typ": "JWT"}
	person := with(validClaims(), "sub", "riley@example.com", "host", nil, "sid", nil, "env", nil, "config_audience", nil)
	c, err := v.Verify(craftES256(t, k, hdr, person))
	if err != nil || c.Subject != "riley@example.com" {
		t.Fatalf("operator token: got %+v, %v; want subject riley@example.com", c, err)
	}
	for _, tc := range []struct {
		name   string
		claims map[string]any
	}{
		{"no sub", with(person, "sub", nil)},
		{"expired", with(person, "exp", testNow.Add(-time.Hour).Unix())},
		{"other audience", with(person, "aud", "someone-else")},
	} {
		if _, err := v.Verify(craftES256(t, k, hdr, tc.claims)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: got %v, want ErrInvalidToken", tc.name, err)
		}
	}
	// A workload verifier still refuses a person's token.
	if _, err := newTestVerifier(t, keyFor(t, k)).Verify(craftES256(t, k, hdr, person)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("workload verifier accepted a token without workload claims: %v", err)
	}
}
