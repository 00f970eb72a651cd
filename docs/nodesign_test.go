package docs_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoDesignReferences keeps the repository self-contained: no help text,
// error, comment or document cites the external design document or its
// section numbers. Migration 001's comment stays: its checksum is recorded
// in every migrated database.
func TestNoDesignReferences(t *testing.T) {
	banned := [][]byte{[]byte("DES" + "IGN"), []byte("\u00a7")}
	skipDirs := map[string]bool{".git": true, "bin": true, ".configpub": true, "out": true, "node_modules": true}
	skipFiles := map[string]bool{filepath.Join("internal", "dbschema", "migrations", "001_init.sql"): true}
	root := ".."
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if skipDirs[d.Name()] && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if skipFiles[rel] || !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Size() > 4<<20 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return nil // binary
		}
		for _, w := range banned {
			if i := bytes.Index(b, w); i >= 0 {
				line := 1 + bytes.Count(b[:i], []byte("\n"))
				t.Errorf("%s:%d: cites the external design document (%q); say it in this repository's own words or link docs/", rel, line, strings.TrimSpace(string(w)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
