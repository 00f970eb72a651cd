package gitfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIgnored: Git's rules for a policy directory below the worktree root —
// info/exclude, the root's .gitignore and a nested one with a negation —
// and a tracked file is never ignored, whatever the patterns say.
func TestIgnored(t *testing.T) {
	dir := makeRepo(t, map[string]string{"policy/agents/a.yaml": "a: 1\n", "policy/local/kept.yaml": "k: 1\n"})
	for rel, s := range map[string]string{
		".git/info/exclude":          "scratch.yaml\n",
		".gitignore":                 "# comments and blank lines\n\nlocal/\n*.tmp.yaml\r\n",
		"policy/agents/.gitignore":   "draft-*.yaml\n!draft-keep.yaml\ndrafts/\n",
		"policy/local/new.yaml":      "n: 1\n",
		"policy/agents/draft-x.yaml": "d: 1\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ignored, err := Ignored(filepath.Join(dir, "policy"))
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"agents/a.yaml":          false,
		"agents/draft-x.yaml":    true,
		"agents/draft-keep.yaml": false,
		"local/new.yaml":         true,
		"local/kept.yaml":        false, // tracked
		"x.tmp.yaml":             true,  // the root's pattern, on a file of the policy directory
		"scratch.yaml":           true,  // info/exclude
		"sub/scratch.yaml":       true,
		"targets/dev/t.yaml":     false,
	} {
		if got := ignored(p, false); got != want {
			t.Errorf("%s: ignored %v, want %v", p, got, want)
		}
	}
	for p, want := range map[string]bool{"local": false /* holds a tracked file */, "agents": false, "build": false} {
		if got := ignored(p, true); got != want {
			t.Errorf("directory %s: ignored %v, want %v", p, got, want)
		}
	}
	if !ignored("agents/drafts", true) {
		t.Errorf("directory agents/drafts: not ignored, want it ignored (drafts/)")
	}
	if !ignored("agents/draft-y.yaml", true) {
		t.Errorf("directory agents/draft-y.yaml: not ignored, want it ignored (draft-*.yaml)")
	}
	if _, err := Ignored(t.TempDir()); err == nil {
		t.Error("outside a repository: no error")
	}
}
