package compiler

import (
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// TestSharedInputs: the inputs a root lists are found among the documents
// read by path; the first one (in path order) that is gone or has another
// digest is named with both digests. Sources whose index was let go
// cannot tell and pass.
func TestSharedInputs(t *testing.T) {
	ss := &sources{byKind: map[string]map[string]*source{
		KindRepository:  {"repo": {File: "configpub.yaml", Digest: "sha256:a"}},
		KindEnvironment: {"dev": {File: "environments/dev.yaml", Digest: "sha256:b"}},
		KindAgent:       {"a": {File: "agents/a.yaml", Digest: "sha256:d"}},
	}}
	k := &inputCheck{env: "dev", release: 4, shared: map[string]string{"configpub.yaml": "sha256:a", "environments/dev.yaml": "sha256:b"}}
	if err := k.sharedInputs(ss); err != nil {
		t.Fatalf("unchanged inputs: %v", err)
	}
	for _, c := range []struct{ path, digest, want string }{
		{"workflows/w.yaml", "sha256:c", "workflows/w.yaml, an input of release 4, is gone"},
		{"environments/dev.yaml", "sha256:x", "environments/dev.yaml changed since release 4 (sha256:x, now sha256:b)"},
	} {
		k.shared[c.path] = c.digest
		if err := k.sharedInputs(ss); err == nil || err.Error() != c.want {
			t.Errorf("%s listed as %s: %v, want %q", c.path, c.digest, err, c.want)
		}
	}
	ss.letGo()
	if err := k.sharedInputs(ss); err != nil {
		t.Errorf("sources let go: %v, want no finding", err)
	}
}

// TestHostInputs: a host's inputs are split into those the root lists
// (compared one by one) and its own (compared by digest with its shard's);
// a host with targets but no shard is stale, one without targets (no
// inputs) passes, and an unreadable shard digest is left to the byte
// comparison.
func TestHostInputs(t *testing.T) {
	own := []bundle.Input{{Path: "agents/a.yaml", Digest: "sha256:1"}, {Path: "targets/t.yaml", Digest: "sha256:2"}}
	d, err := bundle.InputsDigest(own)
	if err != nil {
		t.Fatal(err)
	}
	k := &inputCheck{env: "dev", release: 2, shared: map[string]string{"configpub.yaml": "sha256:r"},
		hosts: map[string]string{"a.example": d, "b.example": ""}}
	in := files{"configpub.yaml": "sha256:r", "agents/a.yaml": "sha256:1", "targets/t.yaml": "sha256:2"}
	for _, c := range []struct {
		host string
		in   files
		want string
	}{
		{"a.example", in, ""},
		{"b.example", in, ""},
		{"c.example", files{}, ""},
		{"c.example", in, "host c.example has targets but no shard in release 2"},
		{"a.example", files{"configpub.yaml": "sha256:x", "agents/a.yaml": "sha256:1"}, "configpub.yaml changed since release 2 (sha256:r, now sha256:x)"},
		{"a.example", files{"configpub.yaml": "sha256:r", "agents/a.yaml": "sha256:9", "targets/t.yaml": "sha256:2"},
			"the inputs of host a.example changed since release 2 (releases/dev/a.example.yaml states inputsDigest " + d + ", the sources "},
	} {
		err := k.host(c.host, c.in)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %v: %v, want none", c.host, c.in, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s %v: %v, want %q", c.host, c.in, err, c.want)
		}
	}
}
