package compiler_test

import (
	"os"
	"strings"
	"testing"
)

// copyRepo copies the fixture policy repository into a temporary directory.
func copyRepo(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(fixtureRepo)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces old with new exactly once in a file.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), old) != 1 {
		t.Fatalf("%s: %q occurs %d times, want 1", path, old, strings.Count(string(b), old))
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
