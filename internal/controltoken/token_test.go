package controltoken

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/signing"
)

func newKey(t *testing.T) (*ecdsa.PrivateKey, signing.TrustedKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := signing.NewTrustedKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return k, tk
}

func TestVerify(t *testing.T) {
	key, trusted := newKey(t)
	other, _ := newKey(t)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const aud = "h/s/prod"
	good, err := Sign(key, aud, ScopeReload, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Verify([]signing.TrustedKey{trusted}, good, now.Add(30*time.Second), 0, aud, ScopeReload); err != nil || c.Scope != ScopeReload || c.ID == "" {
		t.Fatalf("good token: got %+v, %v", c, err)
	}
	forged, _ := Sign(other, aud, ScopeReload, now, time.Minute)
	parts := strings.Split(good, ".")
	fp := strings.Split(forged, ".")
	hs256 := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"` + Type + `","kid":"` + trusted.ID + `"}`))
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"` + Type + `","kid":"` + trusted.ID + `"}`))
	for _, tc := range []struct {
		name  string
		tok   string
		at    time.Time
		aud   string
		scope string
		want  error
	}{
		{"other key", forged, now, aud, ScopeReload, ErrUntrustedKey},
		{"signature of another key under our kid", parts[0] + "." + parts[1] + "." + fp[2], now, aud, ScopeReload, ErrSignature},
		{"claims swapped", parts[0] + "." + fp[1] + "." + parts[2], now, aud, ScopeReload, ErrSignature},
		{"alg HS256", hs256 + "." + parts[1] + "." + parts[2], now, aud, ScopeReload, ErrMalformed},
		{"alg none", none + "." + parts[1] + ".", now, aud, ScopeReload, ErrMalformed},
		{"expired", good, now.Add(time.Minute), aud, ScopeReload, ErrExpired},
		{"not yet valid", good, now.Add(-time.Second), aud, ScopeReload, ErrExpired},
		{"other runtime", good, now, "h/other/prod", ScopeReload, ErrAudience},
		{"other scope", good, now, aud, ScopeStatus, ErrScope},
		{"two parts", parts[0] + "." + parts[1], now, aud, ScopeReload, ErrMalformed},
		{"huge", strings.Repeat("a", 5000), now, aud, ScopeReload, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify([]signing.TrustedKey{trusted}, tc.tok, tc.at, 0, tc.aud, tc.scope)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Sign(key, aud, ScopeReload, now, time.Hour); err == nil {
		t.Fatal("a one-hour token was signed; want refused (max 5 min)")
	}
}
