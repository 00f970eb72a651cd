package gen

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ReleaseFiles returns every file under dir/releases (the release manifest
// root and shards of every environment), keyed by slash path relative to
// dir.
func ReleaseFiles(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(filepath.Join(dir, "releases"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	return out, err
}

// Changed lists, sorted, the paths added, removed or rewritten between two
// sets of files.
func Changed(a, b map[string][]byte) []string {
	var out []string
	for p, x := range a {
		if y, ok := b[p]; !ok || !bytes.Equal(x, y) {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
