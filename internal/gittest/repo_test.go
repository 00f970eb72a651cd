package gittest_test

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/gittest"
)

// Stable hashes: fixed author, email and clock.
const (
	wantRoot  = "fd0376268375d044b2ef91237dfed4cf6bd3a4fe"
	wantMerge = "dc5bfbbec548742727cc4a139b9b4b0f30fff7d7"
)

func build(t *testing.T) (r *gittest.Repo, root, feat, merge plumbing.Hash) {
	r = gittest.FromDir(t, "testdata/tree", "initial")
	root = r.Tip(gittest.Main)
	feat = r.Commit(gittest.Commit{Branch: "feature", From: root, Files: map[string][]byte{"releases/dev.yaml": []byte("releaseVersion: 2\n")}, Message: "release 2"})
	merge = r.Merge(gittest.Main, "feature", gittest.Commit{Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	return r, root, feat, merge
}

func TestStableHashes(t *testing.T) {
	_, root, _, merge := build(t)
	if root.String() != wantRoot {
		t.Errorf("got root %s, want %s", root, wantRoot)
	}
	if merge.String() != wantMerge {
		t.Errorf("got merge %s, want %s", merge, wantMerge)
	}
	_, root2, _, merge2 := build(t)
	if root2 != root || merge2 != merge {
		t.Errorf("got %s/%s on a second build, want %s/%s", root2, merge2, root, merge)
	}
}

func TestMerge(t *testing.T) {
	r, root, feat, merge := build(t)
	c, err := r.Git.CommitObject(merge)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ParentHashes) != 2 || c.ParentHashes[0] != root || c.ParentHashes[1] != feat {
		t.Fatalf("got parents %v, want [%s %s]", c.ParentHashes, root, feat)
	}
	if got := string(r.Files(merge)["releases/dev.yaml"]); got != "releaseVersion: 2\n" {
		t.Errorf("got merged file %q, want the feature's", got)
	}
	if got, want := c.Message, "Merge branch 'feature' into main\n\nReviewed-by: Carol <carol@example.com>\n"; got != want {
		t.Errorf("got message %q, want %q", got, want)
	}
	if r.Tip(gittest.Main) != merge {
		t.Errorf("got main at %s, want the merge %s", r.Tip(gittest.Main), merge)
	}
	r.Checkout()
}

func TestSignedCommit(t *testing.T) {
	r := gittest.New(t)
	key := gittest.NewKey(t, "Alice", "alice@example.com")
	other := gittest.NewKey(t, "Bob", "bob@example.com")
	h := r.Commit(gittest.Commit{Files: map[string][]byte{"a": []byte("a")}, SignWith: key})
	c, err := r.Git.CommitObject(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(key.Armored); err != nil {
		t.Errorf("got %v, want the signature to verify with the signer's key", err)
	}
	if _, err := c.Verify(other.Armored); err == nil {
		t.Error("got a valid signature with another key, want a failure")
	}
}
