// Package fsfault causes real file-system faults for tests: a directory on
// a tmpfs of its own, which a test makes read-only or fills up, so that
// writes fail with EROFS or ENOSPC as on a read-only or full volume (root
// ignores a directory's permission bits, so a chmod causes nothing). It
// mounts, which needs CAP_SYS_ADMIN on Linux (root in the test container);
// without it the test is skipped, saying why. Test code only.
package fsfault

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Volume is a tmpfs mounted for one test.
type Volume struct {
	t   testing.TB
	Dir string // the mount point
}

// New mounts a tmpfs of size bytes in a temporary directory for t and
// unmounts it when t ends; it skips t where it cannot mount.
func New(t testing.TB, size int64) *Volume {
	t.Helper()
	v := &Volume{t: t, Dir: t.TempDir()}
	if err := mount(v.Dir, size); err != nil {
		t.Skipf("fsfault: cannot mount a tmpfs at %s (needs CAP_SYS_ADMIN on Linux): %v", v.Dir, err)
	}
	t.Cleanup(func() {
		if err := unmount(v.Dir); err != nil {
			t.Errorf("fsfault: unmount %s: %v", v.Dir, err)
		}
	})
	return v
}

// ReadOnly remounts the volume read-only: every write fails with EROFS.
func (v *Volume) ReadOnly() {
	v.t.Helper()
	if err := remount(v.Dir, true); err != nil {
		v.t.Fatalf("fsfault: remount %s read-only: %v", v.Dir, err)
	}
}

// Writable remounts the volume read-write again.
func (v *Volume) Writable() {
	v.t.Helper()
	if err := remount(v.Dir, false); err != nil {
		v.t.Fatalf("fsfault: remount %s read-write: %v", v.Dir, err)
	}
}

// Fill takes up every free byte of the volume with a file of its own
// (".fill"): every later write that needs space fails with ENOSPC, as on
// a full volume.
func (v *Volume) Fill() {
	v.t.Helper()
	f, err := os.Create(filepath.Join(v.Dir, ".fill"))
	if err != nil {
		v.t.Fatalf("fsfault: fill %s: %v", v.Dir, err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		n, err := f.Write(chunk)
		if errors.Is(err, syscall.ENOSPC) {
			if n == 0 && len(chunk) == 1 {
				return
			}
			chunk = chunk[:max(len(chunk)/2, 1)] // the last partial page
			continue
		}
		if err != nil {
			v.t.Fatalf("fsfault: fill %s: %v", v.Dir, err)
		}
	}
}
