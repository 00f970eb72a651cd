package gitfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// errSymlink refuses symbolic links: following one could leave the commit tree.
var errSymlink = errors.New("symbolic links in a commit tree are not followed")

// Tree returns a read-only fs.FS view of the tree of commit c, without
// touching any worktree. Every file reports c's committer time (UTC) as its
// ModTime. Regular and executable files can be opened; symbolic links and
// submodules are listed but refuse Open. Files are read lazily. The FS is
// safe for concurrent use.
func Tree(c *object.Commit) (fs.FS, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of commit %s: %w", c.Hash, err)
	}
	return &treeFS{root: tree, modTime: c.Committer.When.UTC()}, nil
}

// treeFS implements fs.FS, fs.ReadFileFS, fs.ReadDirFS and fs.StatFS over a
// go-git tree. go-git trees cache lookups internally, hence the mutex.
type treeFS struct {
	mu      sync.Mutex
	root    *object.Tree
	modTime time.Time
}

var (
	_ fs.ReadFileFS = (*treeFS)(nil)
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
)

func (f *treeFS) lookup(op, name string) (*object.TreeEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &object.TreeEntry{Name: ".", Mode: filemode.Dir, Hash: f.root.Hash}, nil
	}
	e, err := f.root.FindEntry(name)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

// Open opens a file or directory of the tree.
func (f *treeFS) Open(name string) (fs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	info := f.info(name, e)
	switch {
	case e.Mode == filemode.Dir:
		entries, err := f.readDir(name)
		if err != nil {
			return nil, err
		}
		return &dirFile{info: info, entries: entries}, nil
	case e.Mode.IsFile() && e.Mode != filemode.Symlink:
		b, err := f.readBlob(name)
		if err != nil {
			return nil, err
		}
		return &file{info: info, r: bytes.NewReader(b)}, nil
	case e.Mode == filemode.Symlink:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errSymlink}
	default:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("unsupported tree entry mode %s", e.Mode)}
	}
}

// ReadFile returns the contents of a regular file.
func (f *treeFS) ReadFile(name string) ([]byte, error) {
	opened, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer opened.Close()
	if ff, ok := opened.(*file); ok {
		return ff.bytes(), nil
	}
	return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
}

// ReadDir lists a directory sorted by name.
func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if e.Mode != filemode.Dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	return f.readDir(name)
}

// Stat describes a file or directory without reading its contents.
func (f *treeFS) Stat(name string) (fs.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return f.info(name, e), nil
}

func (f *treeFS) readDir(name string) ([]fs.DirEntry, error) {
	t := f.root
	if name != "." {
		var err error
		if t, err = f.root.Tree(name); err != nil {
			return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
		}
	}
	out := make([]fs.DirEntry, 0, len(t.Entries))
	for i := range t.Entries {
		out = append(out, fs.FileInfoToDirEntry(f.info(path.Join(name, t.Entries[i].Name), &t.Entries[i])))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (f *treeFS) readBlob(name string) ([]byte, error) {
	file, err := f.root.File(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	r, err := file.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return b, nil
}

// info describes the entry e found at the slash-separated path name.
func (f *treeFS) info(name string, e *object.TreeEntry) *fileInfo {
	fi := &fileInfo{name: path.Base(name), modTime: f.modTime}
	switch e.Mode {
	case filemode.Dir:
		fi.mode = fs.ModeDir | 0o555
	case filemode.Executable:
		fi.mode = 0o555
	case filemode.Symlink:
		fi.mode = fs.ModeSymlink | 0o444
	case filemode.Submodule:
		fi.mode = fs.ModeIrregular
	default:
		fi.mode = 0o444
	}
	if e.Mode.IsFile() && e.Mode != filemode.Symlink {
		if size, err := f.root.Size(name); err == nil {
			fi.size = size
		}
	}
	return fi
}
