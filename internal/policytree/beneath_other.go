//go:build !linux

package policytree

import (
	"io/fs"
	"os"
)

// beneath is Linux's openat2(2) fast path; elsewhere every open is checked
// component by component.
type beneath struct{}

func newBeneath(*os.Root) *beneath { return nil }

func (b *beneath) close() error { return nil }

func (b *beneath) open(string) (fs.File, fs.FileInfo, bool) { return nil, nil, false }
