package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gitfs"
)

// editFile replaces old with new in the file at dir/rel, failing when old
// is not there.
func editFile(t *testing.T, dir, rel, old, new string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not hold %q", rel, old)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bothEditsAtOnce returns the release that compiling both edits the tests
// make (the account Agent's request rate, the advisor's token budget) at
// once, at createdAt at, writes on the release a copy of dir holds.
func bothEditsAtOnce(t *testing.T, dir, at string) []byte {
	t.Helper()
	once := copyDir(t, dir)
	editFile(t, once, "agents/account.yaml", "requestsPerMinute: 120", "requestsPerMinute: 150")
	editFile(t, once, "agents/advisor.yaml", "tokensPerDay: 800000", "tokensPerDay: 900000")
	if out, err := runCLI("compile", "--repo", once, "--env", "dev", "--created-at", at); err != nil {
		t.Fatalf("compile both edits at once: %v %s", err, out)
	}
	want, err := compiler.CommittedRelease(os.DirFS(once), "dev")
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// TestCompileBaseRefRebuildsABranchsRelease: a branch that compiled, got
// review feedback and compiled again holds release 3 on its own release 2,
// which its base never recorded. The merge check names the fix, plan warns,
// and compile --base-ref rebuilds it as release 2 on the base's release 1 —
// byte for byte the release that compiling both edits at once on the base
// writes; after that --check --base-ref passes and compile --base-ref again
// changes nothing. A base the branch does not contain is refused: the
// release would be built from sources without its changes.
func TestCompileBaseRefRebuildsABranchsRelease(t *testing.T) {
	const at = "2026-10-03T00:00:00Z"
	dir := gitFixture(t)
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	base := head.Hash().String() // release 1: what the branch merges onto

	want := bothEditsAtOnce(t, dir, at) // the expected release

	// The branch: one edit compiled and committed, then another.
	editFile(t, dir, "agents/account.yaml", "requestsPerMinute: 120", "requestsPerMinute: 150")
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-02T00:00:00Z"); err != nil || !strings.Contains(out, "release dev/2 (base 1)") {
		t.Fatalf("compile the first edit: %v %s", err, out)
	}
	commitAll(t, r, "first edit", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))
	editFile(t, dir, "agents/advisor.yaml", "tokensPerDay: 800000", "tokensPerDay: 900000")
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", at); err != nil || !strings.Contains(out, "release dev/3 (base 2)") {
		t.Fatalf("compile the second edit: %v %s", err, out)
	}
	commitAll(t, r, "second edit", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC))

	// On the branch alone release 3 verifies (release 2 is in its history);
	// against the base it cannot, and the error says what to run.
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil {
		t.Fatalf("check on the branch: %v %s", err, out)
	}
	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check", "--base-ref", base)
	if exitCode(err) != exitRefused || !strings.Contains(fmtErr(err), "release 2 of dev is not in the first-parent history of "+base) ||
		!strings.Contains(fmtErr(err), "configpub compile --base-ref") {
		t.Fatalf("check against the base: got %v (exit %d), want a refusal naming the fix", err, exitCode(err))
	}
	out, err := runCLI("plan", "--repo", dir, "--env", "dev", "--base-ref", base, "--output", "json")
	if err != nil {
		t.Fatalf("plan: %v %s", err, out)
	}
	var plan struct {
		Release   int64  `json:"release"`
		NotOnBase string `json:"notOnBase"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Release != 3 || !strings.Contains(plan.NotOnBase, "release 3 on base 2, but "+base+" holds release 1") ||
		!strings.Contains(plan.NotOnBase, "configpub compile --base-ref "+base) {
		t.Fatalf("plan of release 3 on the branch: %+v, want notOnBase naming the fix", plan)
	}

	out, err = runCLI("compile", "--repo", dir, "--env", "dev", "--base-ref", base, "--created-at", at)
	if err != nil || !strings.Contains(out, "release dev/2 (base 1)") || !strings.Contains(out, "rewritten") ||
		!strings.Contains(out, "releases/dev.yaml held release 3, not in "+base) {
		t.Fatalf("compile --base-ref: %v\n%s", err, out)
	}
	got, err := compiler.CommittedRelease(os.DirFS(dir), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the rebuilt release is not the release both edits compile to at once on release 1")
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check", "--base-ref", base); err != nil {
		t.Fatalf("check of the rebuilt release against the base: %v %s", err, out)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--base-ref", base, "--created-at", at); err != nil || !strings.Contains(out, "unchanged") || strings.Contains(out, "held release") {
		t.Fatalf("compile --base-ref again: %v\n%s\nwant it unchanged", err, out)
	}
	if out, err = runCLI("plan", "--repo", dir, "--env", "dev", "--base-ref", base); err != nil || strings.Contains(out, "warning:") {
		t.Fatalf("plan of the rebuilt release: %v\n%s\nwant no warning", err, out)
	}
	// A merge conflict in releases/ resolved by taking the base's files:
	// the same release again, and no word of a release the branch held.
	fixture, err := compiler.CommittedRelease(os.DirFS("../../fixtures/policy-repo"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if err := compiler.WriteReleaseFiles(context.Background(), dir, fixture); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI("compile", "--repo", dir, "--env", "dev", "--base-ref", base, "--created-at", at)
	if err != nil || !strings.Contains(out, "rewritten") || strings.Contains(out, "held release") {
		t.Fatalf("compile --base-ref on the base's own release files: %v\n%s", err, out)
	}
	if got, _ := compiler.CommittedRelease(os.DirFS(dir), "dev"); !bytes.Equal(got, want) {
		t.Fatal("compile --base-ref on the base's own release files wrote another release")
	}
	// A conflict left in the root: --base-ref does not read it.
	conflict := "<<<<<<< HEAD\nreleaseVersion: 2\n=======\nreleaseVersion: 3\n>>>>>>> main\n"
	if err := os.WriteFile(filepath.Join(dir, "releases", "dev.yaml"), []byte(conflict), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--base-ref", base, "--created-at", at); err != nil {
		t.Fatalf("compile --base-ref over a conflicted root: %v\n%s", err, out)
	}
	if got, _ := compiler.CommittedRelease(os.DirFS(dir), "dev"); !bytes.Equal(got, want) {
		t.Fatal("compile --base-ref over a conflicted root wrote another release")
	}

	// A base HEAD does not contain: HEAD back at the first edit, the second
	// edit's commit as the base.
	top, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(top.Hash())
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Reset(&git.ResetOptions{Commit: c.ParentHashes[0], Mode: git.HardReset}); err != nil {
		t.Fatal(err)
	}
	before, _ := compiler.CommittedRelease(os.DirFS(dir), "dev")
	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--base-ref", top.Hash().String(), "--created-at", at)
	if exitCode(err) != exitRefused || !errors.Is(err, gitfs.ErrNotContained) || !strings.Contains(fmtErr(err), "merge or rebase onto it first") {
		t.Fatalf("compile on a base HEAD does not contain: got %v (exit %d)", err, exitCode(err))
	}
	if after, _ := compiler.CommittedRelease(os.DirFS(dir), "dev"); !bytes.Equal(before, after) {
		t.Fatal("a refused --base-ref wrote the release")
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestCompileRevertIsANewRelease: a commit that reverts a released change
// takes releases/dev.yaml back to release 1 with its sources, which verifies
// on its own but which promote would ignore (it recorded release 1 before).
// --check refuses it, naming release 2 in the history, and plan warns; compile builds
// release 3 on release 2 with release 1's policy, which --check then
// verifies across the revert.
func TestCompileRevertIsANewRelease(t *testing.T) {
	dir := gitFixture(t)
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	release1, err := compiler.CommittedRelease(os.DirFS(dir), "dev")
	if err != nil {
		t.Fatal(err)
	}
	account, _ := os.ReadFile(filepath.Join(dir, "agents", "account.yaml"))
	editFile(t, dir, "agents/account.yaml", "requestsPerMinute: 120", "requestsPerMinute: 150")
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-02T00:00:00Z"); err != nil || !strings.Contains(out, "release dev/2 (base 1)") {
		t.Fatalf("compile release 2: %v %s", err, out)
	}
	commitAll(t, r, "release 2", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))
	// git revert: the source and the release files back as they were.
	if err := os.WriteFile(filepath.Join(dir, "agents", "account.yaml"), account, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := compiler.WriteReleaseFiles(context.Background(), dir, release1); err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "Revert release 2", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC))

	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	if exitCode(err) != exitRefused || !errors.Is(err, compiler.ErrStale) ||
		!strings.Contains(fmtErr(err), "releases/dev.yaml is release 1, but the first-parent history of HEAD holds release 2") ||
		!strings.Contains(fmtErr(err), "releases only move forward") {
		t.Fatalf("check of the revert: got %v (exit %d), want a stale refusal naming release 2", err, exitCode(err))
	}
	out, err := runCLI("plan", "--repo", dir, "--env", "dev")
	if err != nil || !strings.Contains(out, "warning: releases/dev.yaml holds release 1, which the first-parent history of HEAD holds below release 2") ||
		!strings.Contains(out, "-> release 3:") {
		t.Fatalf("plan of the revert: %v\n%s\nwant release 3, what compile writes, and a warning naming release 2", err, out)
	}
	out, err = runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-04T00:00:00Z")
	if err != nil || !strings.Contains(out, "release dev/3 (base 2)") || !strings.Contains(out, "releases/dev.yaml held release 1, older than release 2") {
		t.Fatalf("compile the revert: %v\n%s\nwant release 3 on release 2", err, out)
	}
	b, err := compiler.CommittedRelease(os.DirFS(dir), "dev")
	if err != nil {
		t.Fatal(err)
	}
	m3, err := bundle.ParseManifest("dev.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := bundle.ParseManifest("dev.yaml", release1)
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, e := range m3.Targets {
		if e.SubjectName != "account" {
			continue
		}
		was := m1.Target(e.Host, e.ServiceID)
		if was == nil || e.PolicyDigest != was.PolicyDigest || e.ContentDigest != was.ContentDigest || !e.Changed || e.ReleaseVersion != 3 {
			t.Errorf("%s/%s in release 3: policy %s content %s changed %v release %d; want release 1's policy and content as a new snapshot of release 3",
				e.Host, e.ServiceID, e.PolicyDigest, e.ContentDigest, e.Changed, e.ReleaseVersion)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("release 3 has no target of Agent account")
	}
	commitAll(t, r, "release 3", time.Date(2026, 10, 4, 0, 0, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil {
		t.Fatalf("check of release 3, whose release 2 is below the revert: %v %s", err, out)
	}
}

// TestCompileAgainBeforeCommitting: edit, compile, edit again, compile —
// before any commit. The first compile's release 2 is in no commit, so the
// second rebuilds release 2 on HEAD's release 1 (byte for byte what one
// compile of both edits writes) instead of chaining release 3 on it, which
// no commit would hold and promote would refuse; the commit then checks.
func TestCompileAgainBeforeCommitting(t *testing.T) {
	const at = "2026-10-03T00:00:00Z"
	dir := gitFixture(t)
	want := bothEditsAtOnce(t, dir, at)

	editFile(t, dir, "agents/account.yaml", "requestsPerMinute: 120", "requestsPerMinute: 150")
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", at); err != nil || !strings.Contains(out, "release dev/2 (base 1)") {
		t.Fatalf("compile the first edit: %v %s", err, out)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", at); err != nil || !strings.Contains(out, "release dev/2 (base 1)") || !strings.Contains(out, "unchanged") {
		t.Fatalf("compile again, nothing edited: %v %s, want release 2 unchanged", err, out)
	}
	if plan := planJSON(t, dir, "HEAD", "--created-at", at); plan.Release != 2 || !plan.Final {
		t.Fatalf("plan of the compiled, uncommitted release 2: %+v, want release 2 with final digests", plan)
	}
	editFile(t, dir, "agents/advisor.yaml", "tokensPerDay: 800000", "tokensPerDay: 900000")
	if out, err := runCLI("plan", "--repo", dir, "--env", "dev", "--created-at", at); err != nil || !strings.Contains(out, "release 1 at HEAD -> release 2:") || strings.Contains(out, "warning:") {
		t.Fatalf("plan of the second edit before compiling it: %v %s, want release 2 on 1, what compile writes", err, out)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", at); err != nil || !strings.Contains(out, "release dev/2 (base 1)") || !strings.Contains(out, "rewritten") {
		t.Fatalf("compile the second edit before committing: %v %s, want release 2 on 1 rewritten", err, out)
	}
	if got, _ := compiler.CommittedRelease(os.DirFS(dir), "dev"); !bytes.Equal(got, want) {
		t.Fatal("the release compiled in two rounds is not the one both edits compile to at once")
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "both edits", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil {
		t.Fatalf("check of the commit: %v %s", err, out)
	}
}

// TestCompileFirstReleaseAgainBeforeCommitting: a repository whose first
// release is not committed yet redoes release 1 when compiled again after
// an edit, instead of writing release 2 on a release 1 no commit holds.
func TestCompileFirstReleaseAgainBeforeCommitting(t *testing.T) {
	dir := gitFixture(t)
	if err := os.RemoveAll(filepath.Join(dir, "releases")); err != nil {
		t.Fatal(err)
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "sources only", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev"); err != nil || !strings.Contains(out, "release dev/1 (base 0)") {
		t.Fatalf("first compile: %v %s", err, out)
	}
	editFile(t, dir, "agents/account.yaml", "requestsPerMinute: 120", "requestsPerMinute: 150")
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev"); err != nil || !strings.Contains(out, "release dev/1 (base 0)") || !strings.Contains(out, "rewritten") {
		t.Fatalf("compile after an edit, release 1 not committed: %v %s, want release 1 rewritten", err, out)
	}
}

// TestCompileAgainKeepsTheReleasesCreatedAt: release 2 compiled with
// --created-at and not committed keeps that createdAt when compiled again
// without one (nothing changes) and after another edit (rewritten, the
// same createdAt); a createdAt given again wins.
func TestCompileAgainKeepsTheReleasesCreatedAt(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	dir := gitFixture(t)
	editFile(t, dir, "agents/account.yaml", "requestsPerMinute: 120", "requestsPerMinute: 150")
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-05T00:00:00Z"); err != nil || !strings.Contains(out, "release dev/2 (base 1)") {
		t.Fatalf("compile with --created-at: %v %s", err, out)
	}
	createdAt := func() string {
		t.Helper()
		root, err := compiler.ReadCommittedRoot(os.DirFS(dir), "dev")
		if err != nil {
			t.Fatal(err)
		}
		return root.CreatedAt
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev"); err != nil || !strings.Contains(out, "unchanged") || createdAt() != "2026-10-05T00:00:00Z" {
		t.Fatalf("compile again without --created-at: %v %s (createdAt %s), want release 2 unchanged", err, out, createdAt())
	}
	editFile(t, dir, "agents/advisor.yaml", "tokensPerDay: 800000", "tokensPerDay: 900000")
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev"); err != nil || !strings.Contains(out, "release dev/2 (base 1)") || !strings.Contains(out, "rewritten") ||
		createdAt() != "2026-10-05T00:00:00Z" {
		t.Fatalf("compile an edit without --created-at: %v %s (createdAt %s), want release 2 rewritten with its createdAt", err, out, createdAt())
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-06T00:00:00Z"); err != nil || createdAt() != "2026-10-06T00:00:00Z" {
		t.Fatalf("compile with another --created-at: %v %s (createdAt %s)", err, out, createdAt())
	}
}
