package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func runCLI(args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCompileCheck(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	for _, env := range []string{"dev", "prod"} {
		if out, err := runCLI("compile", "--repo", repo, "--env", env, "--check"); err != nil {
			t.Fatalf("check %s on the committed fixtures: %v (%s)", env, err, out)
		}
	}
	p := filepath.Join(repo, "agents", "advisor.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("tokensPerDay: 800000"), []byte("tokensPerDay: 900000"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runCLI("compile", "--repo", repo, "--env", "dev", "--check")
	if err == nil || exitCode(err) != exitRefused {
		t.Fatalf("got %v (exit %d), want a refusal (exit 1)", err, exitCode(err))
	}
	if !strings.Contains(err.Error(), "dev.lightapi.net/com.networknt.agent-advisor-1.0.0/dev") {
		t.Errorf("got %q, want it to name the advisor target", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "releases", "dev.yaml")); err != nil {
		t.Fatal(err)
	}
}

func TestCompileRefusalWritesNothing(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	p := filepath.Join(repo, "agents", "account.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("temperature: 0.2"), []byte("temperature: .nan"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(repo, "releases", "dev.yaml"))
	out := filepath.Join(t.TempDir(), "out")
	_, err := runCLI("compile", "--repo", repo, "--env", "dev", "--out", out, "--created-at", "2026-09-01T00:00:00Z")
	if exitCode(err) != exitRefused || !strings.Contains(err.Error(), "agents/account.yaml:19: spec.model.temperature") {
		t.Fatalf("got %v (exit %d), want exit 1 naming agents/account.yaml:19: spec.model.temperature", err, exitCode(err))
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output directory exists after a refusal")
	}
	after, _ := os.ReadFile(filepath.Join(repo, "releases", "dev.yaml"))
	if !bytes.Equal(before, after) {
		t.Errorf("release manifest rewritten after a refusal")
	}
}

func TestCompileNothingChangedWritesNothingNew(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	m := filepath.Join(repo, "releases", "dev.yaml")
	st0, _ := os.Stat(m)
	before, _ := os.ReadFile(m)
	if _, err := runCLI("compile", "--repo", repo, "--env", "dev", "--created-at", "2030-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(m)
	st1, _ := os.Stat(m)
	if !bytes.Equal(before, after) || !st0.ModTime().Equal(st1.ModTime()) {
		t.Errorf("release manifest was rewritten though nothing changed")
	}
}
