package compiler

import "testing"

// TestSharedInputs: the inputs a root lists are found among the model's
// documents by path; the first one (in path order) that is gone or has
// another digest is named with both digests.
func TestSharedInputs(t *testing.T) {
	m := &model{
		repo: &entry[repositorySpec]{src: &source{File: "configpub.yaml", Digest: "sha256:a"}},
		envs: map[string]*entry[environmentSpec]{"dev": {src: &source{File: "environments/dev.yaml", Digest: "sha256:b"}}},
	}
	k := &inputCheck{env: "dev", release: 4, shared: map[string]string{"configpub.yaml": "sha256:a", "environments/dev.yaml": "sha256:b"}}
	if err := k.sharedInputs(m); err != nil {
		t.Fatalf("unchanged inputs: %v", err)
	}
	for _, c := range []struct{ path, digest, want string }{
		{"workflows/w.yaml", "sha256:c", "workflows/w.yaml, an input of release 4, is gone"},
		{"environments/dev.yaml", "sha256:x", "environments/dev.yaml changed since release 4 (sha256:x, now sha256:b)"},
	} {
		k.shared[c.path] = c.digest
		if err := k.sharedInputs(m); err == nil || err.Error() != c.want {
			t.Errorf("%s listed as %s: %v, want %q", c.path, c.digest, err, c.want)
		}
	}
}
