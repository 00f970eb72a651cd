package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.yml")
	if err := Write(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "two" {
		t.Fatalf("got %q, %v; want two", b, err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("want only the target in %s, got %d entries", dir, len(ents))
	}
}

func TestCrashBeforeRenameKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.yml")
	if err := Write(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("simulated crash")
	err := WriteWithHook(p, []byte("new"), 0o644, func() error { return crash })
	if !errors.Is(err, crash) {
		t.Fatalf("got %v, want the hook's error", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old" {
		t.Errorf("target = %q after a crash before rename, want old", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("want the target and one stray temporary file, got %d entries", len(ents))
	}
}

func TestWriteIntoMissingDirectoryFails(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "f"), nil, 0o644); err == nil {
		t.Fatal("want an error")
	}
}

// TestRemoveStale: the temporary files a crash before the rename left are
// removed, and only they: not the file, not another file's temporaries, not
// names that only look alike.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "values.yml")
	crash := errors.New("crash")
	for range 3 {
		if err := WriteWithHook(p, []byte("x"), 0o644, func() error { return crash }); !errors.Is(err, crash) {
			t.Fatalf("WriteWithHook: got %v, want the crash", err)
		}
	}
	if err := Write(p, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	others := []string{".values.yml.tmp", ".values.yml.12a.tmp", ".values.yml.123.tmp.bak", "values.yml.123.tmp", ".other.yml.123.tmp", ".values.yml.123.tmp2"}
	for _, n := range others {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveStale(p)
	if err != nil || len(removed) != 3 {
		t.Fatalf("RemoveStale: got %v, %v; want the 3 temporary files", removed, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != len(others)+1 {
		t.Fatalf("left %v; want values.yml and %v", names, others)
	}
	if b, _ := os.ReadFile(p); string(b) != "kept" {
		t.Fatalf("values.yml holds %q, want kept", b)
	}
}
