package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/configpub/configpub/registry"
)

// TestVerifyOCIRefusesAnArtifactCopiedIntoAnotherTargetsRepository: a
// validly signed values artifact of one target copied (manifest and
// signature tag) into another target's repository is refused by
// verify-oci without --host/--service-id (which accepted it), and with
// the artifact's own identity, naming the annotations and repository path
// components that differ; in its own repository it verifies.
func TestVerifyOCIRefusesAnArtifactCopiedIntoAnotherTargetsRepository(t *testing.T) {
	pub, out := publishFixture(t)
	var refs []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "pushed" && !strings.Contains(f[1], "/release@") {
			refs = append(refs, f[1])
		}
	}
	if len(refs) < 2 {
		t.Fatalf("publish printed %d values artifacts, want 2 or more:\n%s", len(refs), out)
	}
	src, dst := refs[0], refs[1]
	srcRepo, dgst, err := registry.ParseRef(src)
	if err != nil {
		t.Fatal(err)
	}
	dstRepo, _, err := registry.ParseRef(dst)
	if err != nil {
		t.Fatal(err)
	}
	from, to := cliRepo(t, srcRepo), cliRepo(t, dstRepo)
	sigTag := strings.Replace(dgst.String(), ":", "-", 1) + ".sig"
	for _, ref := range []string{dgst.String(), sigTag} {
		if _, err := oras.Copy(context.Background(), from, ref, to, ref, oras.DefaultCopyOptions); err != nil {
			t.Fatalf("copy %s to %s: %v", ref, dstRepo, err)
		}
	}
	copied := dstRepo + "@" + dgst.String()
	srcPath, dstPath := strings.Split(srcRepo, "/"), strings.Split(dstRepo, "/")
	host, svc := srcPath[len(srcPath)-2], srcPath[len(srcPath)-1]

	if o, err := runCLI("verify-oci", src, "--trust-key", pub, "--plain-http", "--host", host, "--service-id", svc); err != nil {
		t.Fatalf("verify-oci of the artifact in its own repository: %v\n%s", err, o)
	}
	for _, extra := range [][]string{nil, {"--host", host, "--service-id", svc}} {
		o, err := runCLI(append([]string{"verify-oci", copied, "--trust-key", pub, "--plain-http"}, extra...)...)
		if err == nil {
			t.Fatalf("verify-oci %v of %s copied into %s: got success, want a refusal\n%s", extra, src, dstRepo, o)
		}
		msg := err.Error()
		if !strings.Contains(msg, "identity mismatch") || !strings.Contains(msg, "not in its own repository") {
			t.Errorf("verify-oci %v: %q does not say the artifact is not in its own repository", extra, msg)
		}
		for i, f := range []string{"envTag", "host", "serviceId"} {
			a, r := srcPath[len(srcPath)-3+i], dstPath[len(dstPath)-3+i]
			if a != r && !strings.Contains(msg, "is \""+a+"\", the repository's "+f+" component is \""+r+"\"") {
				t.Errorf("verify-oci %v: %q does not name the %s that differs (%s, repository %s)", extra, msg, f, a, r)
			}
		}
	}
}

func cliRepo(t *testing.T, name string) *remote.Repository {
	t.Helper()
	r, err := remote.NewRepository(name)
	if err != nil {
		t.Fatal(err)
	}
	r.PlainHTTP = true
	return r
}

// TestTrustKeyErrorsNameTheFlag: a --trust-key of verify-oci or fetch that
// cannot be read, or holds no public key, is refused naming --trust-key
// and the file, before anything is pulled or fetched (nothing listens at
// the registry or server here). verify-oci said only "open FILE: …" and
// both named a key that did not parse by its path alone.
func TestTrustKeyErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	missing, notKey := filepath.Join(dir, "cosign.pub"), filepath.Join(dir, "token.json")
	if err := os.WriteFile(notKey, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := "127.0.0.1:1/policy/dev/h/s@sha256:" + strings.Repeat("0", 64)
	for _, tc := range []struct{ key, want string }{
		{missing, "--trust-key: open " + missing + ": no such file or directory"},
		{notKey, "--trust-key " + notKey + ": parse public key"},
	} {
		for _, args := range [][]string{
			{"verify-oci", ref, "--plain-http", "--trust-key", tc.key},
			{"fetch", "--server", "http://127.0.0.1:1", "--token-file", tok, "--host", "h", "--service-id", "s", "--env", "dev",
				"--config-audience", "agent", "--cache-dir", t.TempDir(), "--out", filepath.Join(dir, "values.yml"), "--trust-key", tc.key},
		} {
			out, err := runCLI(args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s --trust-key %s: got %v, want %q\n%s", args[0], tc.key, err, tc.want, out)
			}
		}
	}
}
