package gitfs

import "path/filepath"

func filepathToSlash(p string) string { return filepath.ToSlash(p) }

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		return r
	}
	return a
}
