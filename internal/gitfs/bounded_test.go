package gitfs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
)

// openPacks counts this process's open file descriptors on pack files
// under dir.
func openPacks(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, fd := range fds {
		p, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(p, dir) && strings.HasSuffix(p, ".pack") {
			n++
		}
	}
	return n
}

// TestBoundedKeepsPacksOpen: a repository opened through Bounded keeps the
// pack file it reads objects from open between reads (go-git otherwise
// opens it, and parses its index, again for every object), and reads every
// file of a packed commit as it was committed.
func TestBoundedKeepsPacksOpen(t *testing.T) {
	files := map[string]string{"configpub.yaml": "a: 1\n"}
	for i := range 300 {
		files[fmt.Sprintf("agents/a%03d.yaml", i)] = fmt.Sprintf("name: a%03d\nprompt: the same long prompt of every agent, deltified in the pack\n", i)
	}
	dir := t.TempDir()
	if _, err := git.PlainInit(dir, false); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, dir, files, "packed", when)
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.RepackObjects(&git.RepackConfig{}); err != nil {
		t.Fatal(err)
	}
	gitDir, err := filepath.EvalSymlinks(filepath.Join(dir, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	readAll := func(r *git.Repository) {
		t.Helper()
		h, err := r.Head()
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.CommitObject(h.Hash())
		if err != nil {
			t.Fatal(err)
		}
		fsys, err := Tree(c)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range files {
			b, err := fs.ReadFile(fsys, name)
			if err != nil || string(b) != want {
				t.Fatalf("%s: %q, %v; want %q", name, b, err, want)
			}
		}
	}

	plain, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	readAll(plain)
	if n := openPacks(t, gitDir); n != 0 {
		t.Fatalf("go-git's default storage left %d pack files open: the count cannot tell the bound", n)
	}
	bounded, err := openSmallCache(dir, treeCacheSize)
	if err != nil {
		t.Fatal(err)
	}
	readAll(bounded)
	if n := openPacks(t, gitDir); n < 1 || n > maxOpenPacks {
		t.Fatalf("%d pack files open after reading through Bounded, want 1 to %d", n, maxOpenPacks)
	}
}
