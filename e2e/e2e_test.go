//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/registry"
)

// build compiles configpub into dir.
func build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "configpub")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/configpub")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// stateDir returns a directory the postgres OS user can traverse.
func stateDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "configpub-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestDemoEndToEnd(t *testing.T) {
	tmp := stateDir(t)
	bin := build(t, tmp)
	state := filepath.Join(tmp, "demo")

	// 1. A full run.
	out := runDemo(t, bin, state, 0)
	for _, want := range []string{
		"Promote release 1", "Promote release 2", "Roll back to release 1",
		"REJECTED", "last-known-good kept", "Demo complete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// Every command line is echoed: none carries a database password.
	if regexp.MustCompile(`postgres(ql)?://[^/@\s:]+:[^/@\s]+@`).MatchString(out) {
		t.Errorf("a command line echoed by the demo carries a database password")
	}
	checkRuntimesMatchRelease(t, state, 1)
	checkSignedArtifacts(t, bin, state)
	noLeftovers(t, state)

	// 2. Ctrl-C in the middle leaves no process running.
	runDemo(t, bin, state, 1)
	noLeftovers(t, state)

	// 3. It runs again after an interrupted run.
	out = runDemo(t, bin, state, 0)
	if !strings.Contains(out, "Demo complete") {
		t.Errorf("second full run did not complete:\n%s", out)
	}
	noLeftovers(t, state)
}

// runDemo runs `configpub demo`; with interruptAfterServer set it sends
// SIGINT once the Config Server has started and expects a non-zero exit.
func runDemo(t *testing.T, bin, state string, interruptAfterServer int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--dir", state)
	var buf bytes.Buffer
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	sc := bufio.NewScanner(pr)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		buf.WriteString(line + "\n")
		if interruptAfterServer > 0 && !signalled && strings.Contains(line, "config-server is ready") {
			_ = cmd.Process.Signal(syscall.SIGINT)
			signalled = true
		}
	}
	err = cmd.Wait()
	out := buf.String()
	switch {
	case interruptAfterServer > 0 && !signalled:
		t.Fatalf("the Config Server never started; output:\n%s", out)
	case interruptAfterServer > 0 && err == nil:
		t.Fatalf("interrupted demo exited 0; output:\n%s", out)
	case interruptAfterServer == 0 && err != nil:
		t.Fatalf("configpub demo: %v; output:\n%s", err, out)
	}
	t.Logf("configpub demo output:\n%s", out)
	return out
}

// checkRuntimesMatchRelease compares every runtime's applied values.yml with
// the artifact digests of release n as committed on main (read with go-git,
// independently of the demo's own checks).
func checkRuntimesMatchRelease(t *testing.T, state string, n int64) {
	t.Helper()
	m := releaseOnMain(t, filepath.Join(state, "policy"), "dev", n)
	files, _ := filepath.Glob(filepath.Join(state, "runtimes", "*", "values.yml"))
	if len(files) != 3 {
		t.Fatalf("want 3 runtimes (one per audience), found %d", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := digest(b)
		found := false
		for _, tg := range m.Targets {
			if tg.ArtifactDigest == got {
				found = true
			}
		}
		if !found {
			t.Errorf("%s holds %s, which is no artifact of release %d", f, got, n)
		}
	}
}

// releaseOnMain finds the release manifest with version n in main's
// first-parent history.
func releaseOnMain(t *testing.T, dir, env string, n int64) *bundle.Manifest {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	for h := ref.Hash(); ; {
		c, err := repo.CommitObject(h)
		if err != nil {
			t.Fatal(err)
		}
		if m := manifestAt(t, c, env); m != nil && m.ReleaseVersion == n {
			return m
		}
		if len(c.ParentHashes) == 0 {
			t.Fatalf("release %d of %s not found on main", n, env)
		}
		h = c.ParentHashes[0]
	}
}

func manifestAt(t *testing.T, c *object.Commit, env string) *bundle.Manifest {
	f, err := c.File("releases/" + env + ".yaml")
	if err != nil {
		return nil
	}
	s, err := f.Contents()
	if err != nil {
		t.Fatal(err)
	}
	files := []bundle.ReleaseFile{{Path: f.Name, Bytes: []byte(s)}}
	refs, err := bundle.ShardRefs(f.Name, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		sf, err := c.File(bundle.ShardPath(env, r.Host))
		if err != nil {
			t.Fatal(err)
		}
		sb, err := sf.Contents()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, bundle.ReleaseFile{Path: sf.Name, Bytes: []byte(sb)})
	}
	m, err := bundle.ParseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkSignedArtifacts restarts the registry over the demo's storage and
// verifies every artifact of releases 1 and 2 by digest: layer digest,
// cosign signature with the demo's public key, and identity annotations;
// with the real cosign CLI too when it is installed (make compat).
func checkSignedArtifacts(t *testing.T, bin, state string) {
	t.Helper()
	addr := freeAddr(t)
	srv := exec.Command(bin, "registry", "serve", "--dir", filepath.Join(state, "registry"), "--listen", addr)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Kill(); _, _ = srv.Process.Wait() }()
	waitHTTP(t, "http://"+addr+"/v2/")
	cosign, _ := exec.LookPath("cosign")
	if p := os.Getenv("CONFIGPUB_TOOLS_BIN"); p != "" {
		if _, err := os.Stat(filepath.Join(p, "cosign")); err == nil {
			cosign = filepath.Join(p, "cosign")
		}
	}
	pub := filepath.Join(state, "keys", "cosign.pub")
	for _, n := range []int64{1, 2} {
		m := releaseOnMain(t, filepath.Join(state, "policy"), "dev", n)
		for _, tg := range m.Targets {
			if tg.ReleaseVersion != n {
				continue // carried over from an earlier release
			}
			repo := registry.Repository(addr+"/configpub", registry.Artifact{EnvTag: "dev", Host: tg.Host, ServiceID: tg.ServiceID})
			ref := repo + ":" + registry.Tag(n)
			dgst := resolve(t, ref)
			full := repo + "@" + dgst
			run(t, bin, "verify-oci", full, "--trust-key", pub, "--plain-http",
				"--host", tg.Host, "--service-id", tg.ServiceID, "--env", "dev")
			if cosign != "" {
				cmd := exec.Command(cosign, "verify", "--key", pub, "--insecure-ignore-tlog=true", "--allow-insecure-registry", "--allow-http-registry", full)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("cosign verify %s: %v\n%s", full, err, out)
				}
			}
		}
	}
	if cosign == "" {
		t.Log("cosign CLI not installed: checked signatures with configpub verify-oci only (make compat runs cosign)")
	}
}

// resolve returns the manifest digest a tag names (HEAD on the registry).
func resolve(t *testing.T, ref string) string {
	t.Helper()
	// ref is host/repo:tag -> http://host/v2/repo/manifests/tag
	i := strings.LastIndex(ref, ":")
	hostRepo, tag := ref[:i], ref[i+1:]
	slash := strings.Index(hostRepo, "/")
	u := fmt.Sprintf("http://%s/v2/%s/manifests/%s", hostRepo[:slash], hostRepo[slash+1:], tag)
	req, err := http.NewRequest(http.MethodHead, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d := resp.Header.Get("Docker-Content-Digest")
	if resp.StatusCode != 200 || d == "" {
		t.Fatalf("HEAD %s: %s (digest %q)", u, resp.Status, d)
	}
	return d
}

func run(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("configpub %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// noLeftovers fails when any process still refers to the state directory.
func noLeftovers(t *testing.T, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := processesMentioning(state)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still running after the demo: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func processesMentioning(s string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		if filepath.Base(d) == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		st, _ := os.ReadFile(filepath.Join(d, "stat"))
		if regexp.MustCompile(`\) Z `).Match(st) {
			continue
		}
		out = append(out, filepath.Base(d)+": "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitHTTP(t *testing.T, u string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready", u)
}
