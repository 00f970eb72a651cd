package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/configpub/configpub/internal/cosignkey"
)

// TestEditedSourcesAreNamedInASubdirectory: compile --check and publish
// name the sources edited since the commit that introduced the release
// when the policy repository is a subdirectory of the Git repository (a
// monorepo's policy/) — they opened the Git repository at the policy
// directory itself and looked for releases/ENV.yaml at the Git root, so
// they said only 'releaseDigest is …'.
func TestEditedSourcesAreNamedInASubdirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "policy")
	if err := os.CopyFS(dir, os.DirFS("../../fixtures/policy-repo")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("a monorepo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := git.PlainInit(root, false)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "fixture", time.Date(2026, 10, 1, 9, 30, 0, 0, time.UTC))
	f, err := os.OpenFile(filepath.Join(dir, "agents", "account.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("# reviewed\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "a comment", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))

	const want = "sources edited since release 1 was compiled: agents/account.yaml; no target's values changed"
	if _, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("compile --check: got %v, want it to contain %q", err, want)
	}

	_, prefix, keyPub, _ := publisher(t)
	out, err := runCLI("publish", "--repo", dir, "--env", "dev", "--registry", prefix,
		"--key", filepath.Join(filepath.Dir(keyPub), cosignkey.PrivateKeyFile), "--plain-http")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("publish: got %v\n%s\nwant it to contain %q", err, out, want)
	}
}
