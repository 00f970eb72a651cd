package bundle_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// FuzzParseManifest: the release manifest parser never panics, and
// whatever it accepts holds its invariants and survives a round trip
// (Marshal, then Parse) with the same content and releaseDigest.
func FuzzParseManifest(f *testing.F) {
	for _, p := range []string{fixture, "../fixtures/policy-repo/releases/prod.yaml"} {
		b, err := readRelease(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(bytes.Replace(b, []byte("releaseVersion: 1\n"), []byte("releaseVersion: -5\n"), 1))
		f.Add(bytes.Replace(b, []byte("baseReleaseVersion: 0\n"), []byte("baseReleaseVersion: 7\n"), 1))
		f.Add([]byte(strings.Replace(string(b), "local-demo\",1,", "local-demo\",0,", 1)))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := bundle.ParseManifest("fuzz.yaml", in)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted a manifest that breaks an invariant: %v", err)
		}
		digest := m.ReleaseDigest
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("marshal an accepted manifest: %v", err)
		}
		if m.ReleaseDigest != digest {
			t.Fatalf("releaseDigest %s after marshal, %s parsed", m.ReleaseDigest, digest)
		}
		back, err := bundle.ParseManifest("fuzz.yaml", out)
		if err != nil {
			t.Fatalf("re-parse of the canonical form: %v", err)
		}
		again, err := back.Marshal()
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("canonical form is not stable: %v", err)
		}
	})
}
