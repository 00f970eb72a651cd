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
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/configpub/configpub/internal/scaffold"
)

// commitAll commits the whole worktree of the go-git repository at dir
// (an empty commit when nothing changed).
func commitAll(t *testing.T, r *git.Repository, msg string, at time.Time) {
	t.Helper()
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "configpub test", Email: "test@configpub.dev", When: at}
	if _, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true}); err != nil {
		t.Fatal(err)
	}
}

// TestInitCompilesValidatesAndPlans runs init in an empty directory, then
// compile, validate and plan on what it wrote.
func TestInitCompilesValidatesAndPlans(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	dir := filepath.Join(t.TempDir(), "policy")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("init", dir)
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	for _, f := range []string{"configpub.yaml", "environments/dev.yaml", "targets/dev/assistant.yaml", ".configpub/schemas/agent.json", ".gitattributes"} {
		if !strings.Contains(out, "  "+f+"\n") {
			t.Errorf("init output does not list %s:\n%s", f, out)
		}
	}
	agent, err := os.ReadFile(filepath.Join(dir, "agents", "assistant.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(agent), "# yaml-language-server: $schema=../.configpub/schemas/agent.json\n") {
		t.Errorf("agents/assistant.yaml does not start with its schema line:\n%s", agent)
	}
	// Checkouts keep LF for other tools (core.autocrlf=true would write
	// CRLF; configpub reads it as LF).
	if b, err := os.ReadFile(filepath.Join(dir, ".gitattributes")); err != nil || !strings.Contains(string(b), "\n* text=auto eol=lf\n") {
		t.Errorf(".gitattributes: %q, %v; want * text=auto eol=lf", b, err)
	}
	var schema map[string]any
	b, err := os.ReadFile(filepath.Join(dir, ".configpub", "schemas", "agent.json"))
	if err != nil || json.Unmarshal(b, &schema) != nil || schema["title"] != "configpub Agent source document" {
		t.Fatalf("editor schema for Agent missing or not the Agent schema (%v)", err)
	}

	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "policy: initial repository", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))

	artifacts := t.TempDir()
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--out", artifacts); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	} else if !strings.Contains(out, "release dev/1 (base 0): 1 targets, 1 changed") {
		t.Errorf("compile output: %s", out)
	}
	values := filepath.Join(artifacts, "dev", "app.example.com", "com.example.assistant", "values.yml")
	if out, err := runCLI("validate", values); err != nil || !strings.Contains(out, "valid agent artifact for app.example.com/com.example.assistant/dev") {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	commitAll(t, r, "policy: release 1", time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil {
		t.Fatalf("compile --check after commit: %v\n%s", err, out)
	}

	// An edit shows in plan as one changed target at the edited path.
	p := filepath.Join(dir, "agents", "assistant.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(string(agent), "requestsPerMinute: 60", "requestsPerMinute: 30", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI("plan", "--repo", dir, "--env", "dev", "--output", "json")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	if !strings.Contains(out, "com.example.assistant") || !strings.Contains(out, "/agentPolicy/limits/requestsPerMinute") {
		t.Errorf("plan does not show the edited limit:\n%s", out)
	}
}

func TestInitRefusesNonEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("init", dir)
	if !errors.Is(err, scaffold.ErrNotEmpty) || exitCode(err) != exitRefused || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("init into a non-empty directory: got %v (exit %d), want a refusal naming notes.txt", err, exitCode(err))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("init wrote into a non-empty directory: %d entries, output %s", len(entries), out)
	}
	// A directory holding only .git (after `git init`) is accepted.
	g := t.TempDir()
	if _, err := git.PlainInit(g, false); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("init", "--env", "staging", g); err != nil {
		t.Fatalf("init after git init: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(g, "targets", "staging", "assistant.yaml")); err != nil {
		t.Errorf("--env staging: %v", err)
	}
	if _, err := runCLI("init", "--env", "Prod", t.TempDir()); exitCode(err) != exitUsage {
		t.Errorf("--env Prod: got %v (exit %d), want a usage error", err, exitCode(err))
	}
}
