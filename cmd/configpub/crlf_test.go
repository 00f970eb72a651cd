package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// toCRLF rewrites the files (slash paths under dir) with CRLF line endings,
// as a checkout with core.autocrlf=true (Git for Windows' default) writes
// them.
func toCRLF(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// yamlFiles lists every .yaml file under dir, slash paths.
func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCRLFCheckoutsVerify: a checkout with CRLF line endings reads as the
// LF bytes Git stores. compile --check refused the release of a CRLF
// checkout (sources and release files digested as checked out), and
// compile wrote a release N+1 recording the CRLF digests, which the LF
// checkout of CI and promote (the committed blobs) then refused as stale.
// Now a CRLF checkout of a release compiled on LF verifies, whichever files
// have CRLF (the release root, a shard, a shared input, a host's input,
// every file), compile leaves it unchanged, and a change compiled on a
// CRLF checkout writes the same release bytes as on an LF one.
func TestCRLFCheckoutsVerify(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []string
	}{
		{"release root", []string{"releases/dev.yaml"}},
		{"release shard", []string{"releases/dev/dev.lightapi.net.yaml"}},
		{"shared input", []string{"environments/dev.yaml"}},
		{"host's input", []string{"agents/advisor.yaml"}},
		{"every file", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := gitFixture(t)
			files := c.files
			if files == nil {
				files = yamlFiles(t, dir)
			}
			before, err := os.ReadFile(filepath.Join(dir, "releases", "dev.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			toCRLF(t, dir, files...)
			if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil {
				t.Fatalf("compile --check of a CRLF checkout: %v\n%s", err, out)
			}
			if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-12-06T00:00:00Z"); err != nil || !strings.Contains(out, "unchanged") {
				t.Fatalf("compile of a CRLF checkout: %v\n%s\nwant the release unchanged", err, out)
			}
			after, err := os.ReadFile(filepath.Join(dir, "releases", "dev.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bytes.ReplaceAll(after, []byte("\r\n"), []byte("\n")), before) {
				t.Errorf("compile rewrote releases/dev.yaml of a CRLF checkout")
			}
		})
	}

	// The same change compiled on an LF and on a CRLF checkout: the same
	// release, byte for byte.
	released := map[string]map[string][]byte{}
	for _, crlf := range []bool{false, true} {
		dir := gitFixture(t)
		p := filepath.Join(dir, "environments", "dev.yaml")
		b, _ := os.ReadFile(p)
		if err := os.WriteFile(p, bytes.Replace(b, []byte("level: DEBUG"), []byte("level: INFO"), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		if crlf {
			toCRLF(t, dir, yamlFiles(t, dir)...)
		}
		if _, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err == nil || strings.Contains(err.Error(), "CRLF") {
			t.Errorf("an edited shared input (CRLF %v): got %v, want stale, no word of line endings", crlf, err)
		}
		if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-12-06T00:00:00Z"); err != nil {
			t.Fatalf("compile (CRLF %v): %v\n%s", crlf, err, out)
		}
		got := map[string][]byte{}
		for _, f := range yamlFiles(t, filepath.Join(dir, "releases")) {
			if got[f], _ = os.ReadFile(filepath.Join(dir, "releases", filepath.FromSlash(f))); strings.HasPrefix(f, "dev") && bytes.Contains(got[f], []byte("\r")) && !strings.HasPrefix(f, "prod") {
				t.Errorf("releases/%s written with CRLF", f)
			}
		}
		released[map[bool]string{false: "LF", true: "CRLF"}[crlf]] = got
	}
	for f, b := range released["LF"] {
		if !strings.HasPrefix(f, "dev") {
			continue
		}
		if !bytes.Equal(released["CRLF"][f], b) {
			t.Errorf("releases/%s differs between the LF and the CRLF checkout", f)
		}
	}
	if !bytes.Contains(released["LF"]["dev.yaml"], []byte("releaseVersion: 2\n")) {
		t.Errorf("the change compiled no release 2")
	}
}
