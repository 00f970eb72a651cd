package main

import (
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
	root := t.TempDir()
	dir := filepath.Join(root, "policy")
	if err := os.CopyFS(dir, os.DirFS("../../fixtures/policy-repo")); err != nil {
		t.Fatal(err)
	}
	// A release of its own: the fixture's activation windows have ended.
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
	promote := func(repo string) (string, error) {
		return runCLI("promote", "--repo", repo, "--env", "dev", "--registry", reg.Host+"/configpub", "--key", keyPath,
			"--plain-http", "--database", db.URL)
	}
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
