package compiler_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// copyRepo copies the fixture policy repository into a temporary directory.
func copyRepo(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(fixtureRepo)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// edit replaces old with new exactly once in a file.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), old) != 1 {
		t.Fatalf("%s: %q occurs %d times, want 1", path, old, strings.Count(string(b), old))
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// history is a policy directory and the releases compiled in it, in
// order: what Git history would record.
type history struct {
	dir, env string
	releases map[int64][]byte
}

// newHistory is the history of environment dev in dir.
func newHistory(t *testing.T, dir string) *history {
	t.Helper()
	return &history{dir: dir, env: "dev", releases: map[int64][]byte{}}
}

// lookup is the recorded-release lookup over h (as Git history or the
// store would answer).
func (h *history) lookup(_ context.Context, env string, version int64) ([]byte, error) {
	if b, ok := h.releases[version]; ok && env == h.env {
		return b, nil
	}
	return nil, fmt.Errorf("release %d of %s: %w", version, env, bundle.ErrReleaseNotRecorded)
}

// try compiles h.env at createdAt without writing.
func (h *history) try(createdAt time.Time) (*compiler.Result, error) {
	return compiler.Compile(context.Background(), os.DirFS(h.dir), compiler.Options{EnvTag: h.env, CreatedAt: createdAt, Previous: h.lookup})
}

// compile compiles h.env and records the committed release.
func (h *history) compile(t *testing.T, createdAt time.Time) *compiler.Result {
	t.Helper()
	res, err := h.try(createdAt)
	if err != nil {
		t.Fatal(err)
	}
	h.releases[res.Manifest.ReleaseVersion] = res.ManifestBytes
	return res
}

// release compiles h.env, writes the new manifest and records it.
func (h *history) release(t *testing.T, createdAt time.Time) *compiler.Result {
	t.Helper()
	res := h.compile(t, createdAt)
	if err := compiler.Write(context.Background(), res, h.dir, ""); err != nil {
		t.Fatal(err)
	}
	return res
}

// benchRepo generates a policy repository of environment "bench" with the
// given number of hosts, 12 targets (10 Agents) each, in a temporary
// directory.
func benchRepo(t *testing.T, hosts int) string {
	t.Helper()
	dir := t.TempDir()
	if err := gen.Write(dir, gen.Options{Targets: hosts * 12, AgentsPerHost: 10, EnvTag: "bench"}); err != nil {
		t.Fatal(err)
	}
	return dir
}
