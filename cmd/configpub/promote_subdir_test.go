package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/registrytest"
)

// TestPromoteAPolicyInASubdirectory: configpub promote --repo names the
// policy directory of a monorepo's checkout (policy/), as compile --repo
// does, and promotes its release from the Git repository that contains it;
// it refused the directory ('repository does not exist'). The Git root,
// which is not the policy repository, is refused naming policy/ and the
// --repo to pass.
func TestPromoteAPolicyInASubdirectory(t *testing.T) {
	root, dir := monorepo(t)
	promoteCLI := promoteDev(t)
	promote := func(repo string) (string, error) { return promoteCLI("--repo", repo) }
	// The Git root is refused naming the policy directory in it and the
	// --repo to pass, not as policy/releases/*'s "unknown kind Release";
	// compile and plan say the same.
	wantSaid := []string{"no configpub.yaml here, but policy/ holds a policy directory (policy/configpub.yaml and policy/releases/)",
		"hint: pass --repo " + dir}
	for _, args := range [][]string{nil, {"compile", "--repo", root, "--env", "dev", "--check"}, {"plan", "--repo", root, "--env", "dev"}} {
		var out string
		var err error
		if args == nil {
			args = []string{"promote"}
			out, err = promote(root)
		} else {
			out, err = runCLI(args...)
		}
		if err == nil {
			t.Errorf("%s --repo the Git root, not the policy repository: no refusal\n%s", args[0], out)
			continue
		}
		for _, w := range wantSaid {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s --repo the Git root: got %v\nwant it to say %q", args[0], err, w)
			}
		}
		if strings.Contains(err.Error(), "unknown kind") {
			t.Errorf("%s --repo the Git root: got %v, which reads the policy's releases/ as sources", args[0], err)
		}
	}
	out, err := promote(dir)
	if err != nil || !strings.Contains(out, "dev release 1") {
		t.Fatalf("promote --repo policy/: %v\n%s", err, out)
	}
}

// monorepo commits, in a new Git worktree, a README at its root and the
// fixture policy repository in policy/ with a release of its own (the
// fixture's activation windows have ended), and returns the root and
// policy/.
func monorepo(t *testing.T) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	dir = filepath.Join(root, "policy")
	if err := os.CopyFS(dir, os.DirFS("../../fixtures/policy-repo")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "releases")); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", now.Format(time.RFC3339)); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte("a monorepo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := git.PlainInitWithOptions(root, &git.PlainInitOptions{InitOptions: git.InitOptions{DefaultBranch: "refs/heads/main"}})
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "policy release 1", now)
	return root, dir
}

// promoteDev returns a configpub promote of env dev against a fresh database
// and registry with a new key, taking the rest of the arguments.
func promoteDev(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	db := pgtest.New(t)
	reg := registrytest.New(t, registrytest.Options{})
	t.Setenv(cosignkey.PasswordEnv, "pw")
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	keyPath, _, err := cosignkey.WriteKeyPair(t.TempDir(), kp)
	if err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		return runCLI(append([]string{"promote", "--env", "dev", "--registry", reg.Host + "/configpub", "--key", keyPath,
			"--plain-http", "--database", db.URL}, args...)...)
	}
}

// TestPromoteAPolicyInABareRepository: a bare repository (a promoter's
// mirror; it has no checkout for --repo to name policy/ in) promotes the
// policy repository in its policy/ with --path policy, the directory from
// the Git repository's root, as Flux's Kustomization spec.path names it.
// It could promote a policy at its root only. Without --path it is refused
// naming policy/ and the --path to pass (the --repo hint would name a
// directory that does not exist); a --path with .. and a --path beside a
// --repo that names a checkout's policy directory already are usage errors.
func TestPromoteAPolicyInABareRepository(t *testing.T) {
	root, dir := monorepo(t)
	bare := filepath.Join(t.TempDir(), "policy.git")
	if _, err := git.PlainClone(bare, true, &git.CloneOptions{URL: root}); err != nil {
		t.Fatal(err)
	}
	promote := promoteDev(t)
	out, err := promote("--repo", bare)
	if err == nil || !strings.Contains(err.Error(), "but policy/ holds a policy directory") ||
		!strings.HasSuffix(err.Error(), "\n  hint: pass --path policy") {
		t.Fatalf("promote --repo a bare repository holding policy/, without --path: %v\n%s\nwant it refused naming --path policy", err, out)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--repo", bare, "--path", "../policy"}},
		{[]string{"--repo", bare, "--path", "/policy"}},
		{[]string{"--repo", dir, "--path", "policy"}},
	} {
		out, err := promote(tc.args...)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "--path ") {
			t.Errorf("promote %s: %v\n%s\nwant a usage error about --path", strings.Join(tc.args, " "), err, out)
		}
	}
	out, err = promote("--repo", bare, "--path", "policy")
	if err != nil || !strings.Contains(out, "dev release 1") {
		t.Fatalf("promote --repo policy.git --path policy: %v\n%s", err, out)
	}
	// The same from the checkout's root: a replay.
	if out, err := promote("--repo", root, "--path", "./policy/"); err != nil || !strings.Contains(out, "dev release 1") {
		t.Fatalf("promote --repo ROOT --path ./policy/: %v\n%s", err, out)
	}
}
