package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

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

// TestValidateAnOlderReleasesFile: a values.yml of release 1, validated
// with --repo against a repository that has since compiled release 2 (the
// target changed), was refused ('the file is publication … (release 1),
// release 2 … holds publication …'). In a Git repository it is now
// compared with release 1, read from the first-parent history of HEAD
// (still refused when edited); in a directory without Git history the
// refusal says which release the file is of and which the directory holds.
func TestValidateAnOlderReleasesFile(t *testing.T) {
	dir := gitFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	if o, err := runCLI("compile", "--repo", dir, "--env", "dev", "--out", out, "--created-at", "2026-09-01T00:00:00Z"); err != nil {
		t.Fatalf("compile --out: %v\n%s", err, o)
	}
	const target = "dev.lightapi.net/com.networknt.agent-account-1.0.0"
	values := filepath.Join(out, "dev", filepath.FromSlash(target), "values.yml")
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	release1 := head.Hash().String()
	p := filepath.Join(dir, "agents", "account.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "maxOutputTokens: 4096", "maxOutputTokens: 2048", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-02T00:00:00Z"); err != nil {
		t.Fatalf("compile release 2: %v\n%s", err, o)
	}
	commitAll(t, r, "release 2: account maxOutputTokens 2048", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))

	o, err := runCLI("validate", values, "--repo", dir, "-o", "json")
	var rep validateReport
	if err != nil || json.Unmarshal([]byte(o), &rep) != nil || rep.Release != 1 || rep.Manifest != "releases/dev.yaml" || rep.ManifestCommit != release1 {
		t.Fatalf("validate --repo of release 1's file after release 2: %v\n%s\nwant it compared with release 1 at %s", err, o, release1)
	}
	if o, err := runCLI("validate", values, "--repo", dir); err != nil || !strings.Contains(o, "the ones release 1 records (releases/dev.yaml at commit "+release1) {
		t.Errorf("validate --repo, text: %v\n%s", err, o)
	}
	edited := filepath.Join(t.TempDir(), "values.yml")
	vb, _ := os.ReadFile(values)
	if err := os.WriteFile(edited, []byte(strings.Replace(string(vb), `logging.level: "TRACE"`, `logging.level: "DEBUG"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI("validate", edited, "--repo", dir); !errors.Is(err, bundle.ErrDigestMismatch) || !strings.Contains(err.Error(), "recorded in release 1") {
		t.Errorf("validate --repo of release 1's file edited: got %v, want a digest mismatch against release 1", err)
	}

	// Without Git history: the directory as files only.
	plain := copyDir(t, dir)
	if err := os.RemoveAll(filepath.Join(plain, ".git")); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI("validate", values, "--repo", plain)
	for _, w := range []string{"the file is target " + target + "'s publication", "of release 1 of dev; " + plain + " holds release 2 (releases/dev.yaml)",
		"is not in a Git repository, so release 1 cannot be read from its history"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("validate --repo DIR without Git: got %v, want it to contain %q", err, w)
		}
	}
	if exitCode(err) != exitRefused {
		t.Errorf("exit %d, want %d", exitCode(err), exitRefused)
	}
}
