package fsfault_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/configpub/configpub/internal/fsfault"
)

// TestReadOnlyAndFull: a write to the volume fails with EROFS once it is
// read-only, succeeds again once writable, and fails with ENOSPC beyond its
// size and once filled.
func TestReadOnlyAndFull(t *testing.T) {
	v := fsfault.New(t, 64<<10)
	f := filepath.Join(v.Dir, "f")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	v.ReadOnly()
	if err := os.WriteFile(f, []byte("y"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write to a read-only volume: %v, want EROFS", err)
	}
	v.Writable()
	if err := os.WriteFile(f, make([]byte, 128<<10), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write beyond the volume's size: %v, want ENOSPC", err)
	}
	if err := os.Remove(f); err != nil {
		t.Fatal(err)
	}
	v.Fill()
	if err := os.WriteFile(filepath.Join(v.Dir, "g"), []byte("x"), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write to a filled volume: %v, want ENOSPC", err)
	}
}
