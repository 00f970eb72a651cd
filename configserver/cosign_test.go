package configserver_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/configpub/configpub/internal/signing"
)

// cosignBinary finds cosign on PATH or where `make compat` installs it.
func cosignBinary(t *testing.T) string {
	if p, err := exec.LookPath("cosign"); err == nil {
		return p
	}
	if p, err := filepath.Abs("../.configpub/tools/bin/cosign"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("cosign not installed (run `make compat` or put cosign on PATH): the cosign check of served manifests did not run")
	return ""
}

// TestCosignVerifiesServedManifest: `cosign verify-blob --key cosign.pub
// --signature <X-Manifest-Signature>` accepts the decoded X-Config-Manifest
// exactly as served, and refuses it with one byte changed.
func TestCosignVerifiesServedManifest(t *testing.T) {
	t.Parallel()
	cosign := cosignBinary(t)
	e := newEnv(t, envOptions{})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("cosign-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	resp, _ := e.do(t, "GET", configsPath(idA), e.token(t, idA, "agent"))
	manifest, err := base64.RawURLEncoding.DecodeString(resp.Header.Get("X-Config-Manifest"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub, err := signing.MarshalPublicKey(&e.seed.signer.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyPath := write("cosign.pub", pub)
	sigPath := write("manifest.sig", []byte(resp.Header.Get("X-Manifest-Signature")))
	verify := func(blob string) ([]byte, error) {
		cmd := exec.Command(cosign, "verify-blob", "--key", keyPath, "--insecure-ignore-tlog=true", "--signature", sigPath, blob)
		cmd.Env = append(os.Environ(), "COSIGN_EXPERIMENTAL=0", "SIGSTORE_NO_CACHE=true", "HOME="+dir)
		return cmd.CombinedOutput()
	}
	if out, err := verify(write("manifest.json", manifest)); err != nil {
		t.Fatalf("cosign verify-blob refused the served manifest: %v\n%s", err, out)
	}
	tampered := append([]byte(nil), manifest...)
	tampered[len(tampered)/2] ^= 1
	if out, err := verify(write("tampered.json", tampered)); err == nil {
		t.Fatalf("cosign verify-blob accepted a tampered manifest:\n%s", out)
	}
}
