package gitfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/policytree"
)

// TestCommittedLinksAndLargeBlobsRefused: the tree of a revision (plan's
// base, promote's commit) goes through the same policy-tree reader as a
// working tree: a committed symbolic link is refused by name, wherever it
// points, and a blob over the limit is refused from its size.
func TestCommittedLinksAndLargeBlobsRefused(t *testing.T) {
	dir := makeRepo(t, map[string]string{"repo/a.yaml": "a: 1\n", "repo/big.yaml": strings.Repeat("b", 2000)})
	for name, target := range map[string]string{"repo/zero.yaml": "/dev/zero", "repo/out.yaml": "../../etc/passwd"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	commitAll(t, dir, map[string]string{"repo/a.yaml": "a: 2\n"})
	fsys, err := TreeFS(filepath.Join(dir, "repo"), "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	tree := policytree.New(fsys, policytree.Limits{MaxFileBytes: 1000})
	if b, err := tree.ReadFile("a.yaml"); err != nil || string(b) != "a: 2\n" {
		t.Fatalf("regular blob: %q, %v", b, err)
	}
	for name, want := range map[string]error{"zero.yaml": policytree.ErrSymlink, "out.yaml": policytree.ErrSymlink, "big.yaml": policytree.ErrTooLarge} {
		if _, err := tree.ReadFile(name); !errors.Is(err, want) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want %v naming it", name, err, want)
		}
	}
	var walked []string
	err = policytree.Walk(tree, func(p string, _ fs.DirEntry) bool { return p == "big.yaml" }, func(p string) error {
		walked = append(walked, p)
		return nil
	})
	if !errors.Is(err, policytree.ErrSymlink) || !strings.Contains(err.Error(), "out.yaml") {
		t.Errorf("walk: %v (read %v), want the first link (out.yaml) refused", err, walked)
	}
}
