// Package atomicfile replaces files atomically and durably: readers see the
// old content or the new, never a mix, and a crash leaves at most a stray
// temporary file next to the target (".<name>.*.tmp").
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write replaces path with data: a temporary file in the same directory is
// written with mode perm, fsynced and renamed over path, then the directory
// is fsynced.
func Write(path string, data []byte, perm fs.FileMode) error {
	return WriteWithHook(path, data, perm, nil)
}

// WriteWithHook is Write with beforeRename called after the temporary file
// is durable and before it is renamed. When the hook returns an error the
// temporary file is left behind, as a crash at that moment would leave it,
// and the error is returned. Tests use it to simulate such a crash.
func WriteWithHook(path string, data []byte, perm fs.FileMode, beforeRename func() error) error {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	keep := false
	defer func() {
		if !keep {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: fsync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if beforeRename != nil {
		if err := beforeRename(); err != nil {
			keep = true
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: rename: %w", path, err)
	}
	keep = true
	return SyncDir(dir)
}

// SyncDir fsyncs a directory so that renames and creations in it survive a
// crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// RemoveStale removes the temporary files a crash during Write left next to
// path (".<name>.<digits>.tmp", os.CreateTemp's names for it) and returns
// the paths it removed. Nothing else is touched: not the file itself, not
// another file's temporaries, not a name that only looks alike. Call it
// before the first write, when no other writer of path runs.
func RemoveStale(path string) ([]string, error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("remove stale temporary files of %s: %w", path, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTemp(e.Name(), name) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// isTemp reports whether entry is a temporary file of Write for name.
func isTemp(entry, name string) bool {
	mid, ok := strings.CutPrefix(entry, "."+name+".")
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, ".tmp")
	if !ok || mid == "" {
		return false
	}
	for _, r := range mid {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
