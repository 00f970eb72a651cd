package gittest_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/gittest"
)

// TestGitAgrees checks the objects with the real git binary: fsck is clean
// and git's own first-parent log is what the builder meant.
func TestGitAgrees(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git binary not installed; objects are checked by go-git only")
	}
	r, root, _, merge := build(t)
	r.Commit(gittest.Commit{Files: map[string][]byte{"x": []byte("x\n")}, SignWith: gittest.NewKey(t, "Alice", "alice@example.com")})
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = r.Dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("fsck", "--strict", "--no-dangling")
	got := strings.Fields(run("log", "--first-parent", "--format=%H", "main"))
	if len(got) != 3 || got[1] != merge.String() || got[2] != root.String() {
		t.Errorf("got first-parent log %v, want [signed %s %s]", got, merge, root)
	}
}
