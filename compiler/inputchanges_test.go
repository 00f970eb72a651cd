package compiler_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

// TestStaleNamesTheChangedInputs: a stale release names the inputs whose
// bytes changed since it was compiled — those its root lists from their
// recorded digests, a host's own from the tree it was compiled from
// (Options.Introduced), or else the host — and says when no target's values
// changed. It named only the first differing field (releaseDigest,
// inputs[1].digest).
func TestStaleNamesTheChangedInputs(t *testing.T) {
	dir := copyRepo(t)
	for _, rel := range []string{"agents/account.yaml", "environments/dev.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), append(b, "# reviewed\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edited := copyRepo(t)
	if err := os.WriteFile(filepath.Join(edited, "releases", "dev.yaml"), []byte("# another release\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		introduced compiler.IntroducedTree
		want       string
	}{
		{"without the tree compiled from", nil,
			"sources edited since release 1 was compiled: environments/dev.yaml; the inputs of host dev.lightapi.net changed since release 1 was compiled; no target's values changed ("},
		{"with the tree compiled from", func(context.Context, string) (fs.FS, error) { return os.DirFS(fixtureRepo), nil },
			"sources edited since release 1 was compiled: agents/account.yaml, environments/dev.yaml; no target's values changed ("},
		{"with a tree of another release", func(context.Context, string) (fs.FS, error) { return os.DirFS(edited), nil },
			"sources edited since release 1 was compiled: environments/dev.yaml; the inputs of host dev.lightapi.net changed"},
		{"with a tree that cannot be read", func(context.Context, string) (fs.FS, error) { return nil, errors.New("no git") },
			"sources edited since release 1 was compiled: environments/dev.yaml; the inputs of host dev.lightapi.net changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "dev", CheckOnly: true,
				CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), Introduced: tt.introduced})
			if err != nil {
				t.Fatal(err)
			}
			err = res.Stale()
			if !errors.Is(err, compiler.ErrStale) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want ErrStale containing %q", err, tt.want)
			}
		})
	}
}
