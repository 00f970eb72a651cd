package policytree

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestBeneathOpensOnlyRegularFilesWithoutLinks: the one-call open of a
// Dir opens a regular file reached without a symbolic link, and declines
// everything else — a link as the file or as a directory on the way, a
// directory, a FIFO (without blocking on it), a missing entry, a path
// leaving the tree — which Open then checks component by component.
func TestBeneathOpensOnlyRegularFilesWithoutLinks(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "agents"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "agents/a.yaml"), []byte("name: a\n"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret.yaml"), []byte("secret\n"), 0o644))
	must(os.Symlink("a.yaml", filepath.Join(dir, "agents/link.yaml")))
	must(os.Symlink("agents", filepath.Join(dir, "linkdir"))) // relative: it stays beneath the tree
	must(os.Symlink(outside, filepath.Join(dir, "out")))
	must(syscall.Mkfifo(filepath.Join(dir, "agents/fifo.yaml"), 0o644))

	f, err := Dir(dir, Limits{})
	must(err)
	defer f.Close()
	file, fi, ok := f.fast.open("agents/a.yaml")
	if !ok {
		if f.fast == nil || f.fast.unsupported.Load() {
			t.Skip("no openat2 on this kernel")
		}
		t.Fatal("agents/a.yaml: declined, want it opened")
	}
	b, err := io.ReadAll(file)
	must(err)
	must(file.Close())
	if string(b) != "name: a\n" || fi.Size() != 8 || fi.Name() != "a.yaml" || !fi.Mode().IsRegular() {
		t.Fatalf("agents/a.yaml: %q, size %d, name %q, mode %v", b, fi.Size(), fi.Name(), fi.Mode())
	}
	for _, name := range []string{"agents/link.yaml", "linkdir/a.yaml", "out/secret.yaml", "agents", "agents/fifo.yaml", "agents/none.yaml", "../" + filepath.Base(outside) + "/secret.yaml"} {
		if file, _, ok := f.fast.open(name); ok {
			file.Close()
			t.Errorf("%s: opened in one call, want it declined", name)
		}
	}
	// Through Open, what was declined is refused naming why; the file is read.
	if got, err := f.ReadFile("agents/a.yaml"); err != nil || string(got) != "name: a\n" {
		t.Fatalf("ReadFile agents/a.yaml: %q, %v", got, err)
	}
	for _, name := range []string{"agents/link.yaml", "linkdir/a.yaml", "out/secret.yaml", "agents/fifo.yaml"} {
		if _, err := f.ReadFile(name); err == nil {
			t.Errorf("ReadFile %s: no error", name)
		}
	}
}
