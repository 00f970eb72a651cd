package cosignkey

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/configpub/configpub/internal/fsfault"
	"github.com/configpub/configpub/internal/signing"
)

func TestKeyPairRoundTrip(t *testing.T) {
	dir := t.TempDir()
	kp, err := GenerateKeyPair([]byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kp.PrivatePEM), "ENCRYPTED SIGSTORE PRIVATE KEY") {
		t.Fatalf("got private key PEM header %q, want ENCRYPTED SIGSTORE PRIVATE KEY", strings.SplitN(string(kp.PrivatePEM), "\n", 2)[0])
	}
	privPath, pubPath, err := WriteKeyPair(dir, kp)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(privPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("got %v mode %v, want cosign.key with mode 0600", err, fi.Mode().Perm())
	}
	if _, _, err := WriteKeyPair(dir, kp); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("second write: got %v, want ErrKeyExists", err)
	}

	s, err := LoadPrivateKeyFile(privPath, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := signing.ParsePublicKeys(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0].ID != s.KeyID() {
		t.Fatalf("got public key id %s, want the private key's %s", keys[0].ID, s.KeyID())
	}
	sig, err := signing.SignBlob(s, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := signing.VerifyBlob(keys, []byte("payload"), sig, ""); err != nil || id != s.KeyID() {
		t.Fatalf("got %q, %v, want the signature to verify with cosign.pub", id, err)
	}
}

func TestLoadPrivateKeyRefusals(t *testing.T) {
	kp, err := GenerateKeyPair([]byte("right"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		pem      []byte
		password string
	}{
		{"wrong password", kp.PrivatePEM, "wrong"},
		{"public key instead", kp.PublicPEM, "right"},
		{"not PEM", []byte("hello"), "right"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadPrivateKey(tt.pem, []byte(tt.password))
			if !errors.Is(err, ErrBadPrivateKey) {
				t.Fatalf("got %v, want ErrBadPrivateKey", err)
			}
		})
	}
}

// TestLoadCosignGeneratedKey loads a key pair written by `cosign
// generate-key-pair` (COSIGN_PASSWORD=configpub-test) when the compat
// script has produced one; see scripts/compat.sh, which runs it.
func TestLoadCosignGeneratedKey(t *testing.T) {
	dir := os.Getenv("CONFIGPUB_COSIGN_KEY_DIR")
	if dir == "" {
		t.Skip("CONFIGPUB_COSIGN_KEY_DIR not set: run by scripts/compat.sh with a key from `cosign generate-key-pair`")
	}
	s, err := LoadPrivateKeyFile(filepath.Join(dir, PrivateKeyFile), []byte(os.Getenv(PasswordEnv)))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(dir, PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := signing.ParsePublicKeys(pub)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0].ID != s.KeyID() {
		t.Fatalf("got %s, want %s", keys[0].ID, s.KeyID())
	}
}

// TestKeyPairWriteIsWholeOrNothing: on a volume with room for cosign.key but
// not for cosign.pub (a real one-page tmpfs, fsfault), WriteKeyPair fails
// naming the error and leaves neither file. It left cosign.key alone — a
// half pair that the next keygen refused to overwrite (ErrKeyExists).
func TestKeyPairWriteIsWholeOrNothing(t *testing.T) {
	v := fsfault.New(t, 4096)
	kp, err := GenerateKeyPair([]byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteKeyPair(v.Dir, kp); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("got %v, want ENOSPC writing cosign.pub", err)
	}
	if ents, err := os.ReadDir(v.Dir); err != nil || len(ents) != 0 {
		t.Fatalf("left %v (%v), want nothing", ents, err)
	}
}
