package gitfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"sync"
	"time"
)

// fileInfo implements fs.FileInfo for tree entries.
type fileInfo struct {
	name    string
	mode    fs.FileMode
	modTime time.Time

	sys any // a gitlink for a submodule; nil otherwise

	once   sync.Once
	size   int64
	sizeOf func() int64 // reads the size the first time it is asked for; nil: size is known
}

func (i *fileInfo) Name() string { return i.name }

// Size is the size of a file's blob, 0 for a directory or when the blob
// cannot be read (opening the file then reports the error).
func (i *fileInfo) Size() int64 {
	i.once.Do(func() {
		if i.sizeOf != nil {
			i.size, i.sizeOf = i.sizeOf(), nil
		}
	})
	return i.size
}

// setSize records a size already known (the blob was read).
func (i *fileInfo) setSize(n int64) { i.once.Do(func() { i.size, i.sizeOf = n, nil }) }

func (i *fileInfo) Mode() fs.FileMode  { return i.mode }
func (i *fileInfo) ModTime() time.Time { return i.modTime }
func (i *fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i *fileInfo) Sys() any           { return i.sys }

// gitlink is the Sys() of a submodule entry: the commit it records
// (policytree.Gitlink, refused as a submodule).
type gitlink string

// Gitlink returns the commit the submodule entry records.
func (g gitlink) Gitlink() string { return string(g) }

// file is an open regular file, held in memory (policy files are small).
type file struct {
	info *fileInfo
	r    *bytes.Reader
}

func (f *file) Stat() (fs.FileInfo, error)                { return f.info, nil }
func (f *file) Read(p []byte) (int, error)                { return f.r.Read(p) }
func (f *file) Seek(off int64, whence int) (int64, error) { return f.r.Seek(off, whence) }
func (f *file) ReadAt(p []byte, off int64) (int, error)   { return f.r.ReadAt(p, off) }
func (f *file) Close() error                              { return nil }

// dirFile is an open directory.
type dirFile struct {
	info    *fileInfo
	entries []fs.DirEntry
	off     int
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errors.New("is a directory")}
}
func (d *dirFile) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.off += n
	return rest[:n], nil
}
