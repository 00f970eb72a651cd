package bundle_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

const fixture = "../fixtures/policy-repo/releases/dev.yaml"

func TestParseMarshalRoundTrip(t *testing.T) {
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseManifest("dev.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(b) {
		t.Fatalf("Marshal(Parse(b)) differs from b")
	}
	d, err := m.Digest()
	if err != nil || d != m.ReleaseDigest {
		t.Fatalf("Digest() = %s, %v; want %s", d, err, m.ReleaseDigest)
	}
	if m.EnvTag != "dev" || m.ReleaseVersion != 1 || len(m.Targets) != 5 {
		t.Errorf("got env %s release %d targets %d, want dev 1 5", m.EnvTag, m.ReleaseVersion, len(m.Targets))
	}
}

func TestParseRefuses(t *testing.T) {
	b, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	tests := []struct {
		name, in, want string
		is             error
	}{
		{"digest mismatch", strings.Replace(s, "releaseVersion: 1\n", "releaseVersion: 2\n", 1), "releaseDigest", bundle.ErrDigestMismatch},
		{"unknown field", strings.Replace(s, "envTag: \"dev\"\n", "envTag: \"dev\"\nextra: 1\n", 1), "unknown field", nil},
		{"wrong kind", strings.Replace(s, "kind: \"Release\"", "kind: \"Other\"", 1), "apiVersion/kind", nil},
		{"duplicate key", strings.Replace(s, "envTag: \"dev\"\n", "envTag: \"dev\"\nenvTag: \"dev\"\n", 1), "duplicate key", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bundle.ParseManifest("dev.yaml", []byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	b, _ := os.ReadFile(fixture)
	old, err := bundle.ParseManifest("dev.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := bundle.ParseManifest("dev.yaml", b)
	cur.Targets[0].ArtifactDigest = "sha256:" + strings.Repeat("0", 64)
	cur.Targets = append(cur.Targets[:1], cur.Targets[2:]...)
	cur.Targets = append(cur.Targets, bundle.TargetEntry{Host: "zz.example.com", ServiceID: "new"})
	got := map[string]string{}
	for _, d := range bundle.Diff(old, cur) {
		got[d.ServiceID] = d.Change
	}
	want := map[string]string{
		old.Targets[0].ServiceID: bundle.ChangeChanged,
		old.Targets[1].ServiceID: bundle.ChangeRemoved,
		old.Targets[2].ServiceID: bundle.ChangeUnchanged,
		"new":                    bundle.ChangeAdded,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %s, want %s", k, got[k], w)
		}
	}
}
