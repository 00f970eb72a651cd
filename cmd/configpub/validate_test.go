package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// TestValidateComparesWithTheRelease: a values.yml whose settings were edited
// after rendering passed validate (only the printed artifactDigest
// differed: the file records no digest of its settings). With --repo it is
// compared with the target's entry in the release manifest and refused,
// naming the target and the settings; without it, validate says what it
// did not check.
func TestValidateComparesWithTheRelease(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	out := filepath.Join(t.TempDir(), "out")
	if o, err := runCLI("compile", "--repo", repo, "--env", "dev", "--out", out, "--created-at", "2026-09-01T00:00:00Z"); err != nil {
		t.Fatalf("compile --out: %v\n%s", err, o)
	}
	const target = "dev.lightapi.net/com.networknt.agent-account-1.0.0"
	values := filepath.Join(out, "dev", filepath.FromSlash(target), "values.yml")
	b, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}

	o, err := runCLI("validate", values, "--repo", repo, "-o", "json")
	var rep validateReport
	if err != nil || json.Unmarshal([]byte(o), &rep) != nil || rep.Manifest != "releases/dev.yaml" || rep.NotChecked != "" || rep.PropertySetDigest == "" {
		t.Fatalf("validate --repo of the file as compiled: %v\n%s", err, o)
	}
	if o, err := runCLI("validate", values); err != nil || !strings.Contains(o, "not checked: that the settings and bytes are what was compiled") {
		t.Errorf("validate without --repo: %v\n%s\nwant it to say what it did not check", err, o)
	}

	edits := []struct{ name, old, new, want string }{
		{"a setting", `logging.level: "TRACE"`, `logging.level: "DEBUG"`, "target " + target + ": digest mismatch: the settings do not match what was compiled"},
		{"a setting added", `logging.level: "TRACE"`, "logging.level: \"TRACE\"\nx: 1", "the settings do not match what was compiled"},
		{"the layout", `logging.level: "TRACE"`, `logging.level: 'TRACE'`, "the bytes do not match what was compiled"},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			if !strings.Contains(string(b), e.old) {
				t.Fatalf("values.yml has no %q:\n%s", e.old, b)
			}
			edited := filepath.Join(t.TempDir(), "values.yml")
			if err := os.WriteFile(edited, []byte(strings.Replace(string(b), e.old, e.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			if o, err := runCLI("validate", edited); err != nil || !strings.Contains(o, "not checked:") {
				t.Fatalf("validate of the edited file without --repo: %v\n%s", err, o)
			}
			o, err := runCLI("validate", edited, "--repo", repo)
			if err == nil || !strings.Contains(err.Error(), e.want) || exitCode(err) != exitRefused {
				t.Fatalf("validate --repo of the edited file: %v (exit %d)\n%s\nwant exit %d and %q", err, exitCode(err), o, exitRefused, e.want)
			}
			if e.name != "the layout" && !errors.Is(err, bundle.ErrDigestMismatch) {
				t.Errorf("not a digest mismatch: %v", err)
			}
		})
	}
}
