package configserver_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/signing"
)

// TestVerifyScript runs scripts/verify-response.sh (bash, curl, sha256sum,
// openssl; with cosign on PATH, as `make compat` sets it, also `cosign
// verify-blob`) against the real server: a served response verifies and is
// written out; the same response with one body byte flipped on the way is
// rejected and nothing is written.
func TestVerifyScript(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "openssl", "sha256sum", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	e := newEnv(t, envOptions{})
	sn := goldenRelease(t, 1)
	e.seed.insert(t, sn)
	e.seed.moveAt(t, sn, time.Now().UTC().Truncate(time.Second), 5*time.Minute, time.Hour)
	waitServed(t, e, sn.Identity, sn.Audience, sn.ID)

	dir := t.TempDir()
	pub, err := signing.MarshalPublicKey(e.seed.trusted[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile, tokenFile := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "token")
	if err := os.WriteFile(keyFile, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(e.token(t, sn.Identity, sn.Audience)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(server, out string, extra ...string) (string, error) {
		args := append([]string{"../scripts/verify-response.sh", "--server", server, "--token-file", tokenFile,
			"--host", sn.Identity.Host, "--service-id", sn.Identity.ServiceID, "--env-tag", sn.Identity.EnvTag,
			"--key", keyFile, "--out", out}, extra...)
		b, err := exec.Command("bash", args...).CombinedOutput()
		return string(b), err
	}
	modes := [][]string{nil}
	if _, err := exec.LookPath("cosign"); err == nil {
		modes = append(modes, []string{"--cosign"})
	}
	for _, mode := range modes {
		out := filepath.Join(dir, "values.yml")
		got, err := run(e.srv.URL, out, mode...)
		if err != nil || !strings.HasPrefix(got, "verified "+sn.ID+" "+sn.ArtifactDigest) {
			t.Fatalf("%v: script on a served response: %v\n%s", mode, err, got)
		}
		if b, _ := os.ReadFile(out); !bytes.Equal(b, sn.Body) {
			t.Fatalf("%v: --out does not hold the served bytes", mode)
		}
	}

	// One body byte flipped between server and script.
	flipping := flippingProxy(t, e.srv.URL, "/configs")
	for _, mode := range modes {
		out := filepath.Join(dir, "flipped.yml")
		got, err := run(flipping.URL, out, mode...)
		if err == nil || !strings.Contains(got, "REJECTED") || !strings.Contains(got, "artifactDigest") {
			t.Fatalf("%v: flipped byte: got %v\n%s\nwant a rejection naming the artifactDigest", mode, err, got)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: a rejected response was written to --out", mode)
		}
	}
}
