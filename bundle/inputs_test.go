package bundle

import (
	"testing"

	"github.com/configpub/configpub/internal/render"
)

// TestInputsDigestIsTheCanonicalList checks the directly written digest of
// an input list against the digest of the same list as a value tree, the
// form the manifest writes it in: names that need escaping, non-ASCII
// paths and the empty list.
func TestInputsDigestIsTheCanonicalList(t *testing.T) {
	for _, in := range [][]Input{
		nil,
		{},
		{{Path: "agents/a.yaml", Digest: "sha256:ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"}},
		{{Path: "agents/a.yaml", Digest: "sha256:1"}, {Path: `tools/"quoted"\back.yaml`, Digest: "sha256:2"}},
		{{Path: "hosts/ünïcödé/\u2028.yaml", Digest: "d"}, {Path: "ctl/\x01\t\n.yaml", Digest: ""}, {Path: "𝄞/e\u0301.yml", Digest: "x"}},
	} {
		got, err := InputsDigest(in)
		if err != nil {
			t.Fatalf("InputsDigest(%q): %v", in, err)
		}
		want, err := render.Digest(inputsValue(in))
		if err != nil {
			t.Fatalf("digest of the tree of %q: %v", in, err)
		}
		if got != want {
			t.Errorf("InputsDigest(%q) = %s, the canonical list digests to %s", in, got, want)
		}
	}
	if _, err := InputsDigest([]Input{{Path: "bad\xff.yaml", Digest: "d"}}); err == nil {
		t.Error("InputsDigest accepted a path that is not UTF-8")
	}
}
