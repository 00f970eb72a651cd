package console

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/configpub/configpub/bundle"
)

func TestDiffMasksSecretsAndCountsTheEnvelope(t *testing.T) {
	old := []byte(`runtimePolicy:
  releaseVersion: 1
agentPolicy:
  limits: {requestsPerMinute: 120}
  apiKeyRef: "vault://secret/a#k"
  dbPassword: "vault://secret/db#pw"
  endpoint: "https://api.example/v1"
  note: plain
`)
	cur := []byte(`runtimePolicy:
  releaseVersion: 2
agentPolicy:
  limits: {requestsPerMinute: 60}
  apiKeyRef: "vault://secret/b#k"
  dbPassword: "vault://secret/db2#pw"
  endpoint: "https://user:hunter22@api.example/v1"
  note: "plain text, changed"
  tags: [a]
`)
	changes, envelope, err := diffValues(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Path: "agentPolicy.apiKeyRef", Old: secretRef, New: secretRef},
		{Path: "agentPolicy.dbPassword", Old: secretRef, New: secretRef},
		{Path: "agentPolicy.endpoint", Old: `"https://api.example/v1"`, New: secretRef},
		{Path: "agentPolicy.limits.requestsPerMinute", Old: "120", New: "60"},
		{Path: "agentPolicy.note", Old: `"plain"`, New: `"plain text, changed"`},
		{Path: "agentPolicy.tags[0]", Old: "", New: `"a"`},
	}
	if len(changes) != len(want) {
		t.Fatalf("got %d changes %+v, want %d", len(changes), changes, len(want))
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("change %d: got %+v, want %+v", i, changes[i], want[i])
		}
	}
	if envelope != 1 {
		t.Errorf("envelope changes: got %d, want 1", envelope)
	}
	if _, _, err := diffValues([]byte("a: [unclosed"), cur); err == nil {
		t.Errorf("unparseable previous values: got no error")
	}
}

// TestLongValuesShowWhereTheyChanged: a long prompt changed past its first
// 120 bytes showed as two equal cut values; both windows now start shortly
// before the first difference, and no cut splits a character.
func TestLongValuesShowWhereTheyChanged(t *testing.T) {
	head := strings.Repeat("You help customers with balances, transactions, transfers — ", 6)
	old := []byte("agentPolicy:\n  prompt: \"" + head + "Be brief.\"\n  motto: \"" + strings.Repeat("é", 200) + "\"\n")
	cur := []byte("agentPolicy:\n  prompt: \"" + head + "Never give investment advice.\"\n  motto: \"" + strings.Repeat("é", 201) + "\"\n")
	changes, _, err := diffValues(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 {
		t.Fatalf("got %+v, want the motto and the prompt changed", changes)
	}
	for _, c := range changes {
		if c.Old == c.New {
			t.Errorf("%s: old and new show the same: %q", c.Path, c.Old)
		}
		for _, v := range []string{c.Old, c.New} {
			if !utf8.ValidString(v) || len(v) > maxValueLen+2*len("…") {
				t.Errorf("%s: shown %q (%d bytes): want valid UTF-8 of at most about %d bytes", c.Path, v, len(v), maxValueLen)
			}
		}
	}
	if p := changes[1]; !strings.HasPrefix(p.Old, "…") || !strings.Contains(p.Old, "Be brief.") || !strings.Contains(p.New, "Never give investment") {
		t.Errorf("prompt: got %q -> %q, want windows around the change", p.Old, p.New)
	}
}

// TestInputChangesOfShardedReleases: inputs of a sharded release compare
// file by file; a shard byte-identical in both releases states no change,
// a shard that differs in one subject states exactly that change, and a
// shard only one release has states all of its inputs.
func TestInputChangesOfShardedReleases(t *testing.T) {
	root := func(digest string) bundle.ReleaseFile {
		return bundle.ReleaseFile{Path: bundle.RootPath("e"), Bytes: []byte("kind: Release\ninputs:\n  - {path: configpub.yaml, digest: \"sha256:aa\"}\n  - {path: tools/t.yaml, digest: \"" + digest + "\"}\n")}
	}
	shard := func(host, inputs string, subjects ...string) bundle.ReleaseFile {
		b := "kind: ReleaseShard\nhost: " + host + "\ninputsDigest: \"" + inputs + "\"\nsubjects:\n"
		for i, d := range subjects {
			b += fmt.Sprintf("  - [\"Agent/%s-a%d\",1,\"%s\"]\n", host, i, d)
		}
		return bundle.ReleaseFile{Path: bundle.ShardPath("e", host), Bytes: []byte(b)}
	}
	base := bundle.Archive([]bundle.ReleaseFile{root("sha256:t1"),
		shard("h1", "sha256:i1", "sha256:x", "sha256:y"), shard("h2", "sha256:i2", "sha256:z"), shard("h3", "sha256:i3", "sha256:w")})
	cur := bundle.Archive([]bundle.ReleaseFile{root("sha256:t2"),
		shard("h1", "sha256:i1", "sha256:x", "sha256:y"), shard("h2", "sha256:i2", "sha256:z2"), shard("h4", "sha256:i4", "sha256:v")})
	got := inputChanges(base, cur)
	want := []InputChange{
		{Path: "Agent/h2-a0 on h2", Old: "sha256:z", New: "sha256:z2"},
		{Path: "Agent/h3-a0 on h3", Old: "sha256:w"},
		{Path: "Agent/h4-a0 on h4", New: "sha256:v"},
		{Path: "inputs of host h3", Old: "sha256:i3"},
		{Path: "inputs of host h4", New: "sha256:i4"},
		{Path: "tools/t.yaml", Old: "sha256:t1", New: "sha256:t2"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d input changes %+v, want %d: %+v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("input change %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := len(inputChanges(nil, cur)); n != 9 {
		t.Errorf("first release: %d input changes, want all 9", n)
	}
	if n := len(inputChanges(cur, cur)); n != 0 {
		t.Errorf("a release against itself: %d input changes, want none", n)
	}
}
