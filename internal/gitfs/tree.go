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
// safe for concurrent use. Each directory's tree object is decoded once
// and every lookup in it is a map lookup, so reading every file of a
// directory of n entries costs O(n), not O(n²).
func Tree(c *object.Commit) (fs.FS, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of commit %s: %w", c.Hash, err)
	}
	return &treeFS{dirs: map[string]*object.Tree{".": tree}, modTime: c.Committer.When.UTC()}, nil
}

// treeFS implements fs.FS, fs.ReadFileFS, fs.ReadDirFS and fs.StatFS over a
// go-git tree. go-git trees cache lookups internally, hence the mutex.
type treeFS struct {
	mu      sync.Mutex
	dirs    map[string]*object.Tree // decoded directories by path, "." the root
	modTime time.Time
}

var (
	_ fs.ReadFileFS = (*treeFS)(nil)
	_ fs.ReadDirFS  = (*treeFS)(nil)
	_ fs.StatFS     = (*treeFS)(nil)
)

// dir returns the decoded tree of directory name, decoding it (and its
// parents) the first time.
func (f *treeFS) dir(name string) (*object.Tree, error) {
	if t, ok := f.dirs[name]; ok {
		return t, nil
	}
	parent, err := f.dir(path.Dir(name))
	if err != nil {
		return nil, err
	}
	t, err := parent.Tree(path.Base(name)) // one path element: the parent's entry map
	if err != nil {
		return nil, err
	}
	f.dirs[name] = t
	return t, nil
}

// lookup finds the entry at name and the tree of the directory holding it
// (nil for ".").
func (f *treeFS) lookup(op, name string) (*object.TreeEntry, *object.Tree, error) {
	if !fs.ValidPath(name) {
		return nil, nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &object.TreeEntry{Name: ".", Mode: filemode.Dir, Hash: f.dirs["."].Hash}, nil, nil
	}
	parent, err := f.dir(path.Dir(name))
	if err != nil {
		return nil, nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	e, err := parent.FindEntry(path.Base(name))
	if err != nil {
		return nil, nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, parent, nil
}

// Open opens a file or directory of the tree.
func (f *treeFS) Open(name string) (fs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, parent, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	info := f.info(name, parent, e)
	switch {
	case e.Mode == filemode.Dir:
		entries, err := f.readDir(name)
		if err != nil {
			return nil, err
		}
		return &dirFile{info: info, entries: entries}, nil
	case e.Mode.IsFile() && e.Mode != filemode.Symlink:
		b, err := readEntry(name, parent, e)
		if err != nil {
			return nil, err
		}
		info.setSize(int64(len(b)))
		return &file{info: info, r: bytes.NewReader(b)}, nil
	case e.Mode == filemode.Symlink:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errSymlink}
	default:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("unsupported tree entry mode %s", e.Mode)}
	}
}

// ReadFile returns the contents of a regular file.
// The blob's bytes are returned as read, not copied from an opened file.
func (f *treeFS) ReadFile(name string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, parent, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	switch {
	case e.Mode == filemode.Dir:
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	case e.Mode.IsFile() && e.Mode != filemode.Symlink:
		return readEntry(name, parent, e)
	case e.Mode == filemode.Symlink:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errSymlink}
	default:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("unsupported tree entry mode %s", e.Mode)}
	}
}

// ReadDir lists a directory sorted by name.
func (f *treeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, _, err := f.lookup("readdir", name)
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
	e, parent, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return f.info(name, parent, e), nil
}

func (f *treeFS) readDir(name string) ([]fs.DirEntry, error) {
	t, err := f.dir(name)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	out := make([]fs.DirEntry, 0, len(t.Entries))
	for i := range t.Entries {
		out = append(out, fs.FileInfoToDirEntry(f.info(path.Join(name, t.Entries[i].Name), t, &t.Entries[i])))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// exactSizeLimit is the largest stated blob size readEntry allocates at
// once: a policy file is far smaller, and a header claiming more is read
// as it comes.
const exactSizeLimit = 1 << 20

// readEntry reads the blob of entry e of directory tree parent.
func readEntry(name string, parent *object.Tree, e *object.TreeEntry) ([]byte, error) {
	file, err := parent.TreeEntryFile(e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	r, err := file.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer r.Close()
	// The blob's header states its size: read into a buffer of exactly
	// that size (io.ReadAll would grow one from 512 bytes, and a compile
	// reads every file of the policy tree), then make sure nothing follows.
	// A size beyond exactSizeLimit is not trusted to allocate up front.
	if file.Size < 0 || file.Size > exactSizeLimit {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		return b, nil
	}
	b := make([]byte, file.Size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("blob shorter than its stated %d bytes: %w", file.Size, err)}
	}
	var one [1]byte
	if n, _ := r.Read(one[:]); n > 0 {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("blob longer than its stated %d bytes", file.Size)}
	}
	return b, nil
}

// info describes the entry e of directory tree parent found at the
// slash-separated path name. A file's size is read from its blob when first
// asked for (listing a directory reads no blob).
func (f *treeFS) info(name string, parent *object.Tree, e *object.TreeEntry) *fileInfo {
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
		fi.sys = gitlink(e.Hash.String())
	default:
		fi.mode = 0o444
	}
	if e.Mode.IsFile() && e.Mode != filemode.Symlink {
		entry := *e
		fi.sizeOf = func() int64 {
			f.mu.Lock()
			defer f.mu.Unlock()
			file, err := parent.TreeEntryFile(&entry)
			if err != nil {
				return 0
			}
			return file.Size
		}
	}
	return fi
}
