package auth_test

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/internal/fsfault"
)

// TestGenerateKeyIsWholeOrNothing: on a volume with room for
// signing-key.pem but not for jwks.json (a real one-page tmpfs, fsfault),
// GenerateKey (token keygen) fails naming the error and leaves neither
// file. It left the key alone — half a pair that the next keygen refused
// to overwrite.
func TestGenerateKeyIsWholeOrNothing(t *testing.T) {
	v := fsfault.New(t, 4096)
	if _, err := auth.GenerateKey(v.Dir); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want ENOSPC writing jwks.json", err)
	}
	if ents, err := os.ReadDir(v.Dir); err != nil || len(ents) != 0 {
		t.Fatalf("left %v (%v), want nothing", ents, err)
	}
}
