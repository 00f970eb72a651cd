package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/policytree"
)

// outsideMarker is the content of a file outside the repository: it must
// never appear in any output or error.
const outsideMarker = "OUTSIDE-MARKER-7f3a"

// hostileTree is one change to a policy repository that every verb reading
// the tree must refuse.
type hostileTree struct {
	name  string
	apply func(t *testing.T, repo, outside string)
	want  string // in the error: the path it names
}

var hostileTrees = []hostileTree{
	{"symlink to /dev/zero", func(t *testing.T, repo, _ string) {
		symlink(t, "/dev/zero", filepath.Join(repo, "agents", "zero.yaml"))
	}, "agents/zero.yaml"},
	{"symlink outside the repository", func(t *testing.T, repo, outside string) {
		symlink(t, filepath.Join(outside, "agent.yaml"), filepath.Join(repo, "agents", "stolen.yaml"))
	}, "agents/stolen.yaml"},
	{"relative symlink out of the repository", func(t *testing.T, repo, outside string) {
		symlink(t, "../../outside/agent.yaml", filepath.Join(repo, "agents", "rel.yaml"))
	}, "agents/rel.yaml"},
	{"symlinked source directory", func(t *testing.T, repo, outside string) {
		symlink(t, outside, filepath.Join(repo, "targets", "more"))
	}, "targets/more"},
	{"releases symlink", func(t *testing.T, repo, outside string) {
		if err := os.Rename(filepath.Join(repo, "releases"), filepath.Join(outside, "releases")); err != nil {
			t.Fatal(err)
		}
		symlink(t, filepath.Join(outside, "releases"), filepath.Join(repo, "releases"))
	}, "releases"},
	{"FIFO", func(t *testing.T, repo, _ string) {
		if err := syscall.Mkfifo(filepath.Join(repo, "agents", "pipe.yaml"), 0o644); err != nil {
			t.Fatal(err)
		}
	}, "agents/pipe.yaml"},
	{"oversize file", func(t *testing.T, repo, _ string) {
		f, err := os.Create(filepath.Join(repo, "agents", "huge.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(policytree.DefaultMaxFileBytes + 1); err != nil { // sparse
			t.Fatal(err)
		}
	}, "agents/huge.yaml"},
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// snapshot records every path under dir with its mode and content digest.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String())
		if fi.Mode().IsRegular() && fi.Size() < 1<<20 {
			c, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" " + sum(c))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestVerbsRefuseHostileTrees runs compile (writing and --check), plan,
// publish and validate over each hostile tree: each is refused with an error
// naming the path, within seconds (no FIFO blocks, no /dev/zero drains),
// allocating little, and nothing outside the repository is read or written.
func TestVerbsRefuseHostileTrees(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "")
	for _, h := range hostileTrees {
		for _, verb := range []string{"compile", "compile --check", "plan", "publish", "validate"} {
			t.Run(h.name+"/"+verb, func(t *testing.T) {
				repo := gitFixture(t)
				outside := filepath.Join(filepath.Dir(repo), "outside")
				if err := os.MkdirAll(outside, 0o755); err != nil {
					t.Fatal(err)
				}
				agent, _ := os.ReadFile(filepath.Join(repo, "agents", "advisor.yaml"))
				// A valid source that would change the release if it were read.
				stolen := bytes.Replace(agent, []byte("name: advisor"), []byte("name: "+strings.ToLower(outsideMarker)), 1)
				stolen = append(stolen, []byte("# "+outsideMarker+"\n")...)
				if err := os.WriteFile(filepath.Join(outside, "agent.yaml"), stolen, 0o644); err != nil {
					t.Fatal(err)
				}
				h.apply(t, repo, outside)
				// Force a new release so a writing compile would write.
				edit := filepath.Join(repo, "agents", "advisor.yaml")
				if err := os.WriteFile(edit, bytes.Replace(agent, []byte("tokensPerDay: 800000"), []byte("tokensPerDay: 900000"), 1), 0o644); err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(t.TempDir(), "out")
				var args []string
				want := h.want
				switch verb {
				case "compile":
					args = []string{"compile", "--repo", repo, "--env", "dev", "--out", out, "--created-at", "2026-11-01T00:00:00Z"}
				case "compile --check":
					args = []string{"compile", "--repo", repo, "--env", "dev", "--check"}
				case "plan":
					args = []string{"plan", "--repo", repo, "--env", "dev", "--output", "markdown"}
				case "publish":
					args = []string{"publish", "--repo", repo, "--env", "dev", "--registry", "127.0.0.1:1/never", "--key", filepath.Join(repo, "no.key"), "--plain-http"}
				case "validate":
					if h.name == "symlinked source directory" || h.name == "releases symlink" {
						t.Skip("validate reads one file")
					}
					p := filepath.Join(repo, filepath.FromSlash(h.want))
					args, want = []string{"validate", p}, p
				}
				before := snapshot(t, outside)
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				type result struct {
					out string
					err error
				}
				done := make(chan result, 1)
				go func() { o, err := runCLI(args...); done <- result{o, err} }()
				var r result
				select {
				case r = <-done:
				case <-time.After(60 * time.Second):
					t.Fatalf("%v blocked", args)
				}
				runtime.ReadMemStats(&ms1)
				if r.err == nil || exitCode(r.err) != exitRefused {
					t.Fatalf("%v: got %v (exit %d), want a refusal; output %s", args, r.err, exitCode(r.err), r.out)
				}
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error %q does not name %s", r.err, want)
				}
				if strings.Contains(r.err.Error()+r.out, outsideMarker) || strings.Contains(strings.ToLower(r.err.Error()+r.out), strings.ToLower(outsideMarker)) {
					t.Errorf("outside content reached the output: %v %s", r.err, r.out)
				}
				if after := snapshot(t, outside); after != before {
					t.Errorf("outside directory changed:\n%s\nwant\n%s", after, before)
				}
				if _, err := os.Stat(out); !os.IsNotExist(err) {
					t.Errorf("--out written after a refusal")
				}
				// Bounded memory: nothing near the 64 MiB file or an
				// unbounded /dev/zero was allocated.
				t.Logf("allocated %d KiB", (ms1.TotalAlloc-ms0.TotalAlloc)>>10)
				if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 48<<20 {
					t.Errorf("allocated %d MiB", alloc>>20)
				}
			})
		}
	}
}

func TestCompileOutModes(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	out := filepath.Join(t.TempDir(), "out")
	if o, err := runCLI("compile", "--repo", repo, "--env", "dev", "--out", out); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	mask := fs.FileMode(syscall.Umask(0))
	syscall.Umask(int(mask))
	n := 0
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		want := fs.FileMode(0o644) &^ mask
		if d.IsDir() {
			want = 0o755 &^ mask
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if err != nil || n < 10 {
		t.Fatalf("walked %d entries: %v", n, err)
	}
}
