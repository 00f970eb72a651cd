package controltoken

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/signing"
)

// FuzzVerify: whatever header and claims a trusted key signed, a runtime's
// status handler accepts the control token only when each part is one JSON
// object of the known members and nothing after it, for its identity and
// scope, within a lifetime of at most MaxLifetime around its clock.
func FuzzVerify(f *testing.F) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	trusted, err := signing.NewTrustedKey(&key.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const aud = "h/s/prod"
	// $KID in a header stands for the trusted key's id (the key is made
	// afresh for each run; the corpus names it so).
	hdr := `{"alg":"ES256","typ":"` + Type + `","kid":"$KID"}`
	claims := func(extra string) string {
		return `{"iss":"` + Issuer + `","aud":"` + aud + `","scope":"reload","iat":` + strconv.FormatInt(now.Unix(), 10) +
			`,"exp":` + strconv.FormatInt(now.Add(time.Minute).Unix(), 10) + `,"jti":"0123456789abcdef"` + extra + `}`
	}
	f.Add([]byte(hdr), []byte(claims("")))
	f.Add([]byte(hdr), []byte(claims(`,"x":1`)))
	f.Add([]byte(hdr), []byte(claims(`,"Aud":"other"`)))
	f.Add([]byte(`{"alg":"none","typ":"`+Type+`"}`), []byte(claims("")))
	f.Fuzz(func(t *testing.T, header, payload []byte) {
		header = bytes.ReplaceAll(header, []byte("$KID"), []byte(trusted.ID))
		input := b64(header) + "." + b64(payload)
		sum := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		c, err := Verify([]signing.TrustedKey{trusted}, input+"."+b64(sig), now, 0, aud, ScopeReload)
		if err != nil {
			return
		}
		if !json.Valid(header) || !json.Valid(payload) {
			t.Fatalf("accepted header %q and claims %q, not one JSON value each", header, payload)
		}
		iat, exp := time.Unix(c.IssuedAt, 0), time.Unix(c.Expires, 0)
		if c.Audience != aud || c.Scope != ScopeReload || c.Issuer != Issuer || !exp.After(iat) || exp.Sub(iat) > MaxLifetime || iat.After(now) || !now.Before(exp) {
			t.Fatalf("accepted claims %+v at %s", c, now)
		}
	})
}
