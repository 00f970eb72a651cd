package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/promote/review"
)

// TestRequireSignedByGitHub: --require-signed-by github loads the shipped
// web-flow keys into the review gate (it reads them as a valid keyring) and
// the gate refuses an unsigned merge and a merge signed by a look-alike key
// in web-flow form; a keyring file still works, and a missing one names the
// shorthand.
func TestRequireSignedByGitHub(t *testing.T) {
	keyring, err := signedByKeyring("github")
	if err != nil {
		t.Fatal(err)
	}
	lookalike := gittest.NewWebFlowKey(t)
	r := gittest.New(t)
	r.Commit(gittest.Commit{Files: map[string][]byte{"a.yaml": []byte("a: 1\n")}, Message: "initial"})
	r.Branch("pr-1", r.Tip(gittest.Main))
	r.Commit(gittest.Commit{Branch: "pr-1", Files: map[string][]byte{"a.yaml": []byte("a: 2\n")}, Message: "edit"})
	unsigned := r.Merge(gittest.Main, "pr-1", gittest.Commit{Message: "Merge branch 'pr-1'"})
	r.Branch("pr-2", r.Tip(gittest.Main))
	r.Commit(gittest.Commit{Branch: "pr-2", Files: map[string][]byte{"a.yaml": []byte("a: 3\n")}, Message: "edit"})
	forged := r.Merge(gittest.Main, "pr-2", gittest.Commit{Message: "Merge pull request #2 from org/pr-2",
		Committer: &gittest.WebFlowCommitter, SignWith: lookalike})
	for name, c := range map[string]string{"unsigned merge": unsigned.String(), "look-alike web-flow signature": forged.String()} {
		_, err := review.Check(context.Background(), r.Git, review.Options{Commit: c, RequireSignedBy: keyring})
		if !errors.Is(err, review.ErrUnsigned) {
			t.Errorf("%s: got %v, want a refusal wrapping ErrUnsigned", name, err)
		}
	}
	// The same look-alike merge passes with the look-alike's own keyring:
	// the refusal above is the shipped keys' doing.
	file := filepath.Join(t.TempDir(), "trusted.asc")
	if err := os.WriteFile(file, []byte(lookalike.Armored), 0o644); err != nil {
		t.Fatal(err)
	}
	own, err := signedByKeyring(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := review.Check(context.Background(), r.Git, review.Options{Commit: forged.String(), RequireSignedBy: own}); err != nil {
		t.Errorf("keyring file: %v", err)
	}
	if _, err := signedByKeyring(filepath.Join(t.TempDir(), "web-flow.gpg")); err == nil || !strings.Contains(err.Error(), "--require-signed-by github") {
		t.Errorf("missing file: %v; want a hint naming --require-signed-by github", err)
	}
}
