package gitfs

import (
	"fmt"
	"io/fs"
	"sync/atomic"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage"
)

// countingStorer counts the tree objects read from the repository's store.
type countingStorer struct {
	storage.Storer
	trees atomic.Int64
}

func (c *countingStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := c.Storer.EncodedObject(t, h)
	if err == nil && o.Type() == plumbing.TreeObject {
		c.trees.Add(1)
	}
	return o, err
}

// wideRepo commits n files in one directory (and two in a nested one) and
// returns the commit read through a store that counts tree reads.
func wideRepo(t testing.TB, n int) (*object.Commit, *countingStorer) {
	t.Helper()
	files := map[string]string{"configpub.yaml": "a: 1\n", "x/y/z.yaml": "z: 1\n", "x/y/w.yaml": "w: 1\n"}
	for i := range n {
		files[fmt.Sprintf("agents/a%05d.yaml", i)] = fmt.Sprintf("name: a%05d\n", i)
	}
	dir := t.TempDir()
	if _, err := git.PlainInit(dir, false); err != nil {
		t.Fatal(err)
	}
	h := commitFiles(t, dir, files, "wide", when)
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStorer{Storer: r.Storer}
	c, err := object.GetCommit(cs, h)
	if err != nil {
		t.Fatal(err)
	}
	return c, cs
}

// TestTreeFSReadsEachDirectoryOnce: walking a commit's tree and statting
// and reading every file of a directory of 2,000 entries reads each tree
// object once (root, agents, x, x/y), not once per file: the cost of
// reading a directory grows with its size, not with its size squared.
func TestTreeFSReadsEachDirectoryOnce(t *testing.T) {
	c, cs := wideRepo(t, 2000)
	fsys, err := Tree(c)
	if err != nil {
		t.Fatal(err)
	}
	before := cs.trees.Load()
	files := 0
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := fs.Stat(fsys, p)
		if err != nil {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		if int64(len(b)) != fi.Size() {
			return fmt.Errorf("%s: stat says %d bytes, read %d", p, fi.Size(), len(b))
		}
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 2003 {
		t.Fatalf("read %d files, want 2003", files)
	}
	if got := cs.trees.Load() - before; got > 4 {
		t.Errorf("read %d tree objects to walk and read 2,003 files in 4 directories, want at most 4", got)
	}
}

// BenchmarkTreeFSReadDirectory reads every file of a directory of 10,000
// entries (stat, then read, as the policy tree reader does).
func BenchmarkTreeFSReadDirectory(b *testing.B) {
	c, _ := wideRepo(b, 10000)
	for b.Loop() {
		fsys, err := Tree(c)
		if err != nil {
			b.Fatal(err)
		}
		ents, err := fs.ReadDir(fsys, "agents")
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range ents {
			p := "agents/" + e.Name()
			if _, err := fs.Stat(fsys, p); err != nil {
				b.Fatal(err)
			}
			if _, err := fs.ReadFile(fsys, p); err != nil {
				b.Fatal(err)
			}
		}
	}
}
