package client

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/digest"
)

// FuzzManifestHeaders: the signed manifest is read from X-Config-Manifest
// only when that is base64url without padding in its one canonical form
// (the bytes it yields encode back to it: no stray bits, no characters
// outside the alphabet), with a signature and a sha256:<hex> key id; and
// X-Config-Watch-Max only when it is decimal digits, giving a bounded,
// positive wait bound (else none).
func FuzzManifestHeaders(f *testing.F) {
	m := base64.RawURLEncoding.EncodeToString([]byte(`{"type":"delivery"}`))
	kid := digest.FromBytes([]byte("key")).String()
	for _, s := range [][4]string{
		{m, "c2ln", kid, "300"}, {m + "=", "c2ln", kid, "0"}, {"", "c2ln", kid, "-5"}, {m, "", kid, "x"},
		{m, "c2ln", "sha256:KEY", "2147483647"}, {"AB", "c2ln", kid, "+300"}, {m + "\n", "c2ln", kid, "2147483648"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, manifest, sig, keyID, watchMax string) {
		h := http.Header{}
		for name, v := range map[string]string{HeaderManifest: manifest, HeaderManifestSignature: sig, HeaderManifestKeyID: keyID, HeaderWatchMax: watchMax} {
			if v != "" {
				h.Set(name, v)
			}
		}
		if mb, gotSig, gotKID, err := manifestHeaders(h); err == nil {
			if base64.RawURLEncoding.EncodeToString(mb) != manifest {
				t.Fatalf("X-Config-Manifest %q accepted as %q, which encodes as %q: not its canonical base64url", manifest, mb, base64.RawURLEncoding.EncodeToString(mb))
			}
			if gotSig != sig || sig == "" || gotKID != keyID || !digest.Valid(keyID) {
				t.Fatalf("signature %q key id %q accepted as %q %q", sig, keyID, gotSig, gotKID)
			}
		}
		w := watchMaxOf(h)
		if w < 0 || w > maxWatchMax {
			t.Fatalf("X-Config-Watch-Max %q read as %s: outside (0, %s]", watchMax, w, maxWatchMax)
		}
		if w > 0 && strings.Trim(watchMax, "0123456789") != "" {
			t.Fatalf("X-Config-Watch-Max %q (not decimal digits) read as %s", watchMax, w)
		}
	})
}
