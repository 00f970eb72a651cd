package policytree

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// beneath opens regular files of a directory in one openat2(2) call that
// refuses a symbolic link in any component of the path and a path leaving
// the directory, without blocking on a FIFO: the checks FS.Open otherwise
// makes component by component (two or three system calls per component).
type beneath struct {
	dir         *os.File     // the directory's handle, held open
	fd          int          // its descriptor, which roots every open
	unsupported *atomic.Bool // the kernel has no openat2 (or a filter refuses it)
}

func newBeneath(r *os.Root) *beneath {
	d, err := r.Open(".")
	if err != nil {
		return nil
	}
	return &beneath{dir: d, fd: int(d.Fd()), unsupported: new(atomic.Bool)}
}

func (b *beneath) close() error {
	if b == nil {
		return nil
	}
	return b.dir.Close()
}

// open opens name if it is a regular file reached without a symbolic link,
// and reports false for anything else — a link, a directory, a special
// file, a missing entry, a kernel without openat2 — which the caller
// checks component by component, naming what is wrong.
func (b *beneath) open(name string) (fs.File, fs.FileInfo, bool) {
	if b == nil || b.unsupported.Load() {
		return nil, nil, false
	}
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat2(b.fd, name, &how)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			b.unsupported.Store(true)
		}
		return nil, nil, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, nil, false
	}
	info := &fdInfo{name: path.Base(name), size: st.Size, mode: fs.FileMode(st.Mode & 0o777),
		modTime: time.Unix(st.Mtim.Unix())}
	return &fdFile{fd: fd, info: info}, info, true
}

// fdFile is a regular file open for reading, read through its descriptor
// directly (an *os.File would probe it for the network poller first).
type fdFile struct {
	fd   int
	info *fdInfo
}

func (f *fdFile) Stat() (fs.FileInfo, error) { return f.info, nil }

func (f *fdFile) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		n, err := unix.Read(f.fd, p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: f.info.name, Err: err}
		}
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *fdFile) Close() error {
	if f.fd < 0 {
		return fs.ErrClosed
	}
	err := unix.Close(f.fd)
	f.fd = -1
	return err
}

// fdInfo describes a regular file from its fstat(2).
type fdInfo struct {
	name    string
	size    int64
	mode    fs.FileMode
	modTime time.Time
}

func (i *fdInfo) Name() string       { return i.name }
func (i *fdInfo) Size() int64        { return i.size }
func (i *fdInfo) Mode() fs.FileMode  { return i.mode }
func (i *fdInfo) ModTime() time.Time { return i.modTime }
func (i *fdInfo) IsDir() bool        { return false }
func (i *fdInfo) Sys() any           { return nil }
