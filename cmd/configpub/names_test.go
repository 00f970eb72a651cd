package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/internal/safetext"
)

// TestAFileNameCannotForgeALogLine: a policy file whose name holds a
// newline followed by a GitHub Actions workflow command is refused — in the
// working tree by compile --check, in the commit plan compares against —
// and the error, as main prints it, stays on one line naming the file
// escaped, so no line of the output starts with "::".
func TestAFileNameCannotForgeALogLine(t *testing.T) {
	const evil = "x\n::error title=PWN::configpub check passed.yaml"
	dir := copyDir(t, "../../fixtures/policy-repo")
	plain := filepath.Join(dir, "agents", "advisor.yaml")
	if err := os.Rename(plain, filepath.Join(dir, "agents", evil)); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, policytree.ErrControlName) {
			t.Fatalf("%s: got %v, want a refusal of the file name", what, err)
		}
		printed := safetext.TerminalLines(err.Error())
		if !strings.Contains(printed, `agents/x\n::error title=PWN::configpub check passed.yaml`) {
			t.Errorf("%s: got %q, want the name escaped", what, printed)
		}
		for _, line := range strings.Split(printed, "\n") {
			if strings.HasPrefix(line, "::") {
				t.Errorf("%s: a line of the error starts with '::': %q", what, printed)
			}
		}
	}
	_, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	refused("compile --check", err)

	// Committed (go-git's worktree refuses to add such a name; the
	// objects are written directly), with a working tree without it: plan
	// reads HEAD's tree through the Git-tree reader.
	r := gittest.FromDir(t, "../../fixtures/policy-repo", "fixture")
	b, err := os.ReadFile("../../fixtures/policy-repo/agents/advisor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r.Commit(gittest.Commit{Files: map[string][]byte{"agents/advisor.yaml": nil, "agents/" + evil: b}, Message: "rename"})
	if err := os.CopyFS(r.Dir, os.DirFS("../../fixtures/policy-repo")); err != nil {
		t.Fatal(err)
	}
	dir = r.Dir
	_, err = runCLI("plan", "--repo", dir, "--env", "dev")
	refused("plan against HEAD", err)
}
