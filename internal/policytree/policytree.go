// Package policytree is the one reader of a policy repository's files, for
// every verb that reads a policy tree: a working-tree directory (compile,
// plan, publish) or a Git tree (plan's base, promote).
//
// The reader never follows a symbolic link and never opens a device, FIFO or
// socket: such an entry is refused with an error naming its path, so nothing
// outside the repository is ever read. Nor does it read a name holding a
// control or format character (a newline, an escape, a bidirectional
// override) or a byte that is not UTF-8: such a name is refused, shown
// escaped, so no file name can forge a line of a log or CI annotation. Every read is bounded before it
// starts: a file larger than Limits.MaxFileBytes, or one that would take the
// bytes read through one FS past Limits.MaxTotalBytes, is refused from its
// size alone, and the read itself stops one byte past the limit in case the
// file grew in between.
//
// On Linux a file of a Dir is opened in one openat2(2) call that refuses a
// link in any component and a path leaving the directory; whatever that
// call declines (or a kernel without it) is checked component by
// component, as every other tree is, which names what is wrong.
//
// WriteFile is the matching writer: it writes a file inside a repository
// directory, refusing a path with a symbolic link or non-directory in any
// component.
package policytree

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/safetext"
)

// Default limits (documented in README.md, "Security model").
const (
	// DefaultMaxFileBytes bounds one file of a policy tree.
	DefaultMaxFileBytes int64 = 64 << 20
	// DefaultMaxTotalBytes bounds every byte read through one FS.
	DefaultMaxTotalBytes int64 = 1 << 30
)

var (
	// ErrSymlink refuses a symbolic link anywhere in a policy tree.
	ErrSymlink = errors.New("symbolic link: policy files are never read through links")
	// ErrSpecial refuses a device, FIFO, socket or other irregular file.
	ErrSpecial = errors.New("not a regular file or directory (device, FIFO, socket or other special file)")
	// ErrTooLarge refuses a read past a limit.
	ErrTooLarge = errors.New("exceeds the policy tree read limit")
	// ErrOutside refuses a path that leaves the repository.
	ErrOutside = errors.New("path leaves the repository")
	// ErrSubmodule refuses a Git submodule: a directory holding a .git
	// file or directory (a working tree's submodule or nested repository)
	// or a gitlink entry of a Git tree.
	ErrSubmodule = errors.New("submodule: policy is read only from this repository's commit")
	// ErrControlName refuses a name holding a control character (C0, DEL,
	// C1), a line or paragraph separator, a Unicode format character
	// (U+202E) or a byte that is not UTF-8.
	ErrControlName = errors.New("control or format character in the name (shown escaped): rename the file")
)

// nameError refuses p when it holds a character a terminal or a log would
// not show as it is; the error names p escaped.
func nameError(op, p string) error {
	if !safetext.HasControl(p) {
		return nil
	}
	return &fs.PathError{Op: op, Path: safetext.Terminal(p), Err: ErrControlName}
}

// Limits bound what an FS reads. Zero fields select the defaults.
type Limits struct {
	MaxFileBytes  int64
	MaxTotalBytes int64
}

func (l Limits) orDefault() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	return l
}

// backend is where an FS reads from.
type backend interface {
	fsys() fs.FS
	// lstat describes name without following a final symbolic link.
	lstat(name string) (fs.FileInfo, error)
	// openFile opens a regular file without following links and without
	// blocking on a FIFO.
	openFile(name string) (fs.File, error)
}

// FS is a bounded, link-refusing fs.FS over a policy tree. It implements
// fs.ReadFileFS, fs.ReadDirFS and fs.StatFS and is safe for concurrent use.
type FS struct {
	b    backend
	lim  Limits
	used *atomic.Int64
	root *os.Root // nil unless opened by Dir
	fast *beneath // Dir's one-call opens (Linux); nil: none
}

var (
	_ fs.ReadFileFS = (*FS)(nil)
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.StatFS     = (*FS)(nil)
)

// Dir opens the working-tree directory dir as a policy tree. Reads cannot
// leave dir. Close releases the directory handle.
func Dir(dir string, lim Limits) (*FS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open policy repository %s: %w", dir, err)
	}
	return &FS{b: dirBackend{r}, lim: lim.orDefault(), used: new(atomic.Int64), root: r, fast: newBeneath(r)}, nil
}

// Close releases the directory handle of an FS opened by Dir.
func (f *FS) Close() error {
	if f.root == nil {
		return nil
	}
	return errors.Join(f.fast.close(), f.root.Close())
}

// New returns fsys as a policy tree with its own read budget. fsys is any
// fs.FS whose Stat does not follow links (a Git tree) or that implements
// fs.ReadLinkFS (os.DirFS). An *FS gets a fresh budget over the same files.
func New(fsys fs.FS, lim Limits) *FS {
	lim = lim.orDefault()
	if t, ok := fsys.(*FS); ok {
		return &FS{b: t.b, lim: lim, used: new(atomic.Int64), root: t.root, fast: t.fast}
	}
	return &FS{b: genericBackend{fsys}, lim: lim, used: new(atomic.Int64)}
}

// check walks name component by component without following links: every
// component must exist, every parent must be a directory, none may be a
// symbolic link, and the final one must be a directory or a regular file.
func (f *FS) check(op, name string) (fs.FileInfo, error) {
	if err := nameError(op, name); err != nil {
		return nil, err
	}
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return f.b.lstat(".")
	}
	var fi fs.FileInfo
	parts := strings.Split(name, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		var err error
		if fi, err = f.b.lstat(p); err != nil {
			return nil, &fs.PathError{Op: op, Path: name, Err: unwrapPathError(err)}
		}
		if err := entryError(fi.Mode(), func() (fs.FileInfo, error) { return fi, nil }); err != nil {
			return nil, &fs.PathError{Op: op, Path: p, Err: err}
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("%s is not a directory", p)}
		}
	}
	return fi, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Gitlink is implemented by the FileInfo.Sys() of a Git tree's entry that
// is a submodule (a gitlink, which gitfs lists as an irregular file): the
// reader refuses it with ErrSubmodule rather than ErrSpecial.
type Gitlink interface {
	// Gitlink returns the commit the submodule entry records.
	Gitlink() string
}

// entryError is modeError, naming a gitlink a submodule.
func entryError(m fs.FileMode, info func() (fs.FileInfo, error)) error {
	err := modeError(m)
	if err == ErrSpecial && m&fs.ModeIrregular != 0 {
		if fi, ierr := info(); ierr == nil {
			if _, ok := fi.Sys().(Gitlink); ok {
				return ErrSubmodule
			}
		}
	}
	return err
}

// modeError refuses everything but directories and regular files.
func modeError(m fs.FileMode) error {
	switch {
	case m&fs.ModeSymlink != 0:
		return ErrSymlink
	case m.IsDir() || m.IsRegular():
		return nil
	default:
		return ErrSpecial
	}
}

// Stat describes name; a symbolic link or special file is refused.
func (f *FS) Stat(name string) (fs.FileInfo, error) { return f.check("stat", name) }

// ReadDir lists a directory. Entries are not checked here: reading or
// walking one that is a link or special file is refused (see Walk).
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if _, err := f.check("readdir", name); err != nil {
		return nil, err
	}
	return fs.ReadDir(f.b.fsys(), name)
}

// Open opens a directory or a regular file. A file's reads count against
// the limits.
func (f *FS) Open(name string) (fs.File, error) {
	if fs.ValidPath(name) && !safetext.HasControl(name) {
		if file, fi, ok := f.fast.open(name); ok {
			// Opened without a link in its path, and a regular file: the
			// checks below, made in one call; its size is that of what
			// was opened.
			if err := f.reserve(name, fi.Size()); err != nil {
				file.Close()
				return nil, err
			}
			return &boundedFile{File: file, name: name, left: fi.Size()}, nil
		}
	}
	fi, err := f.check("open", name)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return f.b.fsys().Open(name)
	}
	if err := f.reserve(name, fi.Size()); err != nil {
		return nil, err
	}
	file, err := f.b.openFile(name)
	if err != nil {
		return nil, err
	}
	// The entry may have changed since check: look again at what was opened.
	ofi, err := file.Stat()
	if err != nil {
		file.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if err := modeError(ofi.Mode()); err != nil || ofi.IsDir() {
		file.Close()
		if err == nil {
			err = errors.New("changed while being read")
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if ofi.Size() > fi.Size() {
		if err := f.reserve(name, ofi.Size()-fi.Size()); err != nil {
			file.Close()
			return nil, err
		}
	}
	return &boundedFile{File: file, name: name, left: max(fi.Size(), ofi.Size())}, nil
}

// reserve takes n bytes from the budget or refuses the read.
func (f *FS) reserve(name string, n int64) error {
	if n > f.lim.MaxFileBytes {
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %d bytes, at most %d per file", ErrTooLarge, n, f.lim.MaxFileBytes)}
	}
	if total := f.used.Add(n); total > f.lim.MaxTotalBytes {
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: more than %d bytes in total", ErrTooLarge, f.lim.MaxTotalBytes)}
	}
	return nil
}

// ReadFile reads a regular file within the limits.
func (f *FS) ReadFile(name string) ([]byte, error) {
	file, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	bf, ok := file.(*boundedFile)
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	// One byte more than announced, so the read that finds the end (or
	// that the file grew) needs no larger buffer.
	b := make([]byte, 0, bf.left+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := bf.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// boundedFile fails a read past the size reserved when it was opened.
type boundedFile struct {
	fs.File
	name string
	left int64
}

func (b *boundedFile) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more than announced means the file grew: refuse.
		var one [1]byte
		if n, _ := b.File.Read(one[:]); n > 0 {
			return 0, &fs.PathError{Op: "read", Path: b.name, Err: fmt.Errorf("%w: grew while being read", ErrTooLarge)}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.File.Read(p)
	b.left -= int64(n)
	return n, err
}

// Walk calls fn, in lexical order, with the path of every regular file of
// fsys under ".", skipping every entry for which skip returns true (a
// skipped directory is not entered). A symbolic link, special file,
// submodule (a directory other than the root holding a .git entry, or a
// Git tree's gitlink) or name holding a control character that is not
// skipped is an error naming its path: a policy tree is only this
// repository's directories and regular files, with names that print as they
// are.
func Walk(fsys fs.FS, skip func(p string, d fs.DirEntry) bool, fn func(p string) error) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && skip != nil && skip(p, d) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if err := nameError("read", p); err != nil {
			return err
		}
		if err := entryError(d.Type(), d.Info); err != nil {
			return &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if d.IsDir() {
			if p != "." && hasDotGit(fsys, p) {
				return &fs.PathError{Op: "read", Path: p, Err: ErrSubmodule}
			}
			return nil
		}
		return fn(p)
	})
}

// hasDotGit: directory p holds a .git entry of any kind (a submodule's
// .git file, a nested repository's directory).
func hasDotGit(fsys fs.FS, p string) bool {
	_, err := fs.Stat(fsys, p+"/.git")
	return err == nil || errors.Is(err, ErrSymlink) || errors.Is(err, ErrSpecial)
}

// ReadFile reads one regular file named on the command line (not through a
// tree): a symbolic link or special file is refused, and so is a file larger
// than maxBytes (DefaultMaxFileBytes when zero).
func ReadFile(name string, maxBytes int64) ([]byte, error) {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	t, err := Dir(dir, Limits{MaxFileBytes: maxBytes})
	if err != nil {
		return nil, err
	}
	defer t.Close()
	b, err := t.ReadFile(base)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		pe.Path = name
	}
	return b, err
}

// WriteFile writes data to rel (slash-separated, inside the directory root)
// atomically with mode perm, creating missing directories with mode 0755.
// Every component of rel must be local (no "..", not absolute) and none may
// be a symbolic link or anything but a directory; an existing final file
// must be a regular file. root itself is the caller's choice and may be a
// link.
func WriteFile(root, rel string, data []byte, perm fs.FileMode) error {
	if !fs.ValidPath(rel) || rel == "." || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return &fs.PathError{Op: "write", Path: rel, Err: ErrOutside}
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := filepath.Join(root, filepath.FromSlash(path.Join(parts[:i+1]...)))
		fi, err := os.Lstat(p)
		last := i == len(parts)-1
		switch {
		case errors.Is(err, fs.ErrNotExist) && !last:
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("write %s: %w", rel, err)
			}
			continue
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("write %s: %w", rel, err)
		}
		if err := modeError(fi.Mode()); err != nil {
			return &fs.PathError{Op: "write", Path: path.Join(parts[:i+1]...), Err: err}
		}
		if !last && !fi.IsDir() {
			return &fs.PathError{Op: "write", Path: rel, Err: fmt.Errorf("%s is not a directory", path.Join(parts[:i+1]...))}
		}
		if last && fi.IsDir() {
			return &fs.PathError{Op: "write", Path: rel, Err: errors.New("is a directory")}
		}
	}
	return atomicfile.Write(filepath.Join(root, filepath.FromSlash(rel)), data, perm)
}

type dirBackend struct{ r *os.Root }

func (d dirBackend) fsys() fs.FS                            { return d.r.FS() }
func (d dirBackend) lstat(name string) (fs.FileInfo, error) { return d.r.Lstat(name) }
func (d dirBackend) openFile(name string) (fs.File, error) {
	return d.r.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

type genericBackend struct{ f fs.FS }

func (g genericBackend) fsys() fs.FS { return g.f }
func (g genericBackend) lstat(name string) (fs.FileInfo, error) {
	if _, ok := g.f.(fs.ReadLinkFS); ok {
		return fs.Lstat(g.f, name)
	}
	return fs.Stat(g.f, name)
}
func (g genericBackend) openFile(name string) (fs.File, error) { return g.f.Open(name) }
