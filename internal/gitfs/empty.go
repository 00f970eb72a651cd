package gitfs

import (
	"errors"
	"io"
	"io/fs"
	"time"
)

// emptyFS is the view of a directory that does not exist at the revision:
// only "." exists, and it has no entries.
type emptyFS struct{}

func (emptyFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name != "." {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &emptyDir{}, nil
}

// emptyDir is the open root of emptyFS; it is also its own fs.FileInfo.
type emptyDir struct{}

func (d *emptyDir) Stat() (fs.FileInfo, error) { return d, nil }
func (d *emptyDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: errors.New("is a directory")}
}
func (d *emptyDir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *emptyDir) ReadDir(n int) ([]fs.DirEntry, error) {
	if n > 0 {
		return nil, io.EOF
	}
	return nil, nil
}

func (d *emptyDir) Name() string       { return "." }
func (d *emptyDir) Size() int64        { return 0 }
func (d *emptyDir) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (d *emptyDir) ModTime() time.Time { return time.Time{} }
func (d *emptyDir) IsDir() bool        { return true }
func (d *emptyDir) Sys() any           { return nil }
