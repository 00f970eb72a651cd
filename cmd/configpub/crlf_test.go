package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCRLFCheckoutsAreExplained: a checkout with core.autocrlf=true (Git for
// Windows' default) writes the committed release files and sources with
// CRLF line endings; compile --check still refuses them (the committed
// bytes are what is digested) but says that the line endings are why, and
// how to check out with LF — it said only "digest mismatch" or "is not in
// canonical form".
func TestCRLFCheckoutsAreExplained(t *testing.T) {
	const advice = "CRLF line endings; configpub digests the committed bytes: check it out with LF (.gitattributes: * text=auto eol=lf)"
	for _, c := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"release root", []string{"releases/dev.yaml"}, []string{"releases/dev.yaml is not in canonical form\n(releases/dev.yaml has " + advice + ")"}},
		{"release shard", []string{"releases/dev/dev.lightapi.net.yaml"}, []string{"the root records sha256:", " (the file has " + advice + ")"}},
		{"shared input", []string{"environments/dev.yaml"}, []string{"\n(environments/dev.yaml has " + advice + ")"}},
		{"host's input", []string{"agents/advisor.yaml"}, []string{"\n(agents/advisor.yaml has " + advice + ")"}},
		{"two sources", []string{"agents/advisor.yaml", "environments/dev.yaml"}, []string{"\n(agents/advisor.yaml, environments/dev.yaml have " + advice + ")"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := gitFixture(t)
			for _, f := range c.files {
				p := filepath.Join(dir, filepath.FromSlash(f))
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check")
			if err == nil {
				t.Fatal("compile --check passed, want a refusal")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
	// A source whose CRLF is not why (the release records another digest
	// for it even with LF) is not named.
	dir := gitFixture(t)
	p := filepath.Join(dir, "environments", "dev.yaml")
	b, _ := os.ReadFile(p)
	b = bytes.ReplaceAll(bytes.Replace(b, []byte("level: DEBUG"), []byte("level: INFO"), 1), []byte("\n"), []byte("\r\n"))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err == nil || strings.Contains(err.Error(), "CRLF") {
		t.Errorf("an edited shared input with CRLF line endings: got %v, want a refusal without the CRLF note", err)
	}
}
