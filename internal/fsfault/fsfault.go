// Package fsfault causes real file-system faults for tests: a directory on
// a tmpfs of its own, which a test makes read-only or fills up, so that
// writes fail with EROFS or ENOSPC as on a read-only or full volume (root
// ignores a directory's permission bits, so a chmod causes nothing). It
// mounts, which needs CAP_SYS_ADMIN on Linux (root in the test container);
// without it the test is skipped, saying why. Test code only.
package fsfault

import "testing"

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
