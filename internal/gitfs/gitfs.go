// Package gitfs reads a policy repository from Git with go-git: the commit
// time of HEAD (the default createdAt of a new release, DESIGN §3) and an
// io/fs view of the tree of any revision (the base of `configpub plan`).
package gitfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrNotRepository: dir is not inside a Git working tree.
var ErrNotRepository = errors.New("not a git repository")

func open(dir string) (*git.Repository, error) {
	r, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("open %s: %w", dir, ErrNotRepository)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return r, nil
}

// HeadCommitTime returns the committer time of HEAD of the repository that
// contains dir, in UTC.
func HeadCommitTime(dir string) (time.Time, error) {
	r, err := open(dir)
	if err != nil {
		return time.Time{}, err
	}
	c, err := commit(r, "HEAD")
	if err != nil {
		return time.Time{}, err
	}
	return c.Committer.When.UTC(), nil
}

func commit(r *git.Repository, rev string) (*object.Commit, error) {
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", rev, err)
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("commit %s: %w", rev, err)
	}
	return c, nil
}

// TreeFS returns the files of dir (a directory inside a Git working tree) as
// they are at revision rev, as an fs.FS rooted at dir. Files are read into
// memory.
func TreeFS(dir, rev string) (fs.FS, error) {
	r, err := open(dir)
	if err != nil {
		return nil, err
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, fmt.Errorf("worktree of %s: %w", dir, err)
	}
	prefix, err := relPath(wt.Filesystem.Root(), dir)
	if err != nil {
		return nil, err
	}
	c, err := commit(r, rev)
	if err != nil {
		return nil, err
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", rev, err)
	}
	if prefix != "" {
		tree, err = tree.Tree(prefix)
		if errors.Is(err, object.ErrDirectoryNotFound) {
			return memFS{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tree %s at %s: %w", prefix, rev, err)
		}
	}
	files := memFS{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if f.Mode != filemode.Regular && f.Mode != filemode.Executable {
			return nil
		}
		rd, err := f.Reader()
		if err != nil {
			return err
		}
		defer rd.Close()
		b, err := io.ReadAll(rd)
		if err != nil {
			return err
		}
		files[f.Name] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read tree at %s: %w", rev, err)
	}
	return files, nil
}

func relPath(root, dir string) (string, error) {
	root = strings.TrimSuffix(path.Clean(filepathToSlash(absPath(root))), "/")
	d := path.Clean(filepathToSlash(absPath(dir)))
	if d == root {
		return "", nil
	}
	if !strings.HasPrefix(d, root+"/") {
		return "", fmt.Errorf("%s is not inside %s", dir, root)
	}
	return strings.TrimPrefix(d, root+"/"), nil
}

// memFS is a read-only in-memory fs.FS of regular files.
type memFS map[string][]byte

func (m memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := m[name]; ok {
		return &memFile{name: path.Base(name), r: bytes.NewReader(b), size: int64(len(b))}, nil
	}
	// A directory: collect direct children.
	prefix := name + "/"
	if name == "." {
		prefix = ""
	}
	seen := map[string]bool{}
	var ents []fs.DirEntry
	for p, b := range m {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		rest := strings.TrimPrefix(p, prefix)
		child, _, isDir := strings.Cut(rest, "/")
		if seen[child] {
			continue
		}
		seen[child] = true
		e := &memEntry{name: child, dir: isDir}
		if !isDir {
			e.size = int64(len(b))
		}
		ents = append(ents, e)
	}
	if len(ents) == 0 && name != "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return &memDir{name: path.Base(name), ents: ents}, nil
}

type memFile struct {
	name string
	r    *bytes.Reader
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return &memEntry{name: f.name, size: f.size}, nil }
func (f *memFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *memFile) Close() error               { return nil }

type memDir struct {
	name string
	ents []fs.DirEntry
	pos  int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return &memEntry{name: d.name, dir: true}, nil }
func (d *memDir) Read([]byte) (int, error)   { return 0, fmt.Errorf("read %s: is a directory", d.name) }
func (d *memDir) Close() error               { return nil }
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.ents[d.pos:]
	if n <= 0 {
		d.pos = len(d.ents)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.pos += n
	return rest[:n], nil
}

type memEntry struct {
	name string
	dir  bool
	size int64
}

func (e *memEntry) Name() string { return e.name }
func (e *memEntry) IsDir() bool  { return e.dir }
func (e *memEntry) Type() fs.FileMode {
	if e.dir {
		return fs.ModeDir
	}
	return 0
}
func (e *memEntry) Info() (fs.FileInfo, error) { return e, nil }
func (e *memEntry) Size() int64                { return e.size }
func (e *memEntry) Mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (e *memEntry) ModTime() time.Time { return time.Time{} }
func (e *memEntry) Sys() any           { return nil }
