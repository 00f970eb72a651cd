package bundle_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// readRelease reads a committed release of the fixture repository (root
// path, e.g. ../fixtures/policy-repo/releases/dev.yaml) as a release
// archive: the root, then every shard in releases/<env>/ by name.
func readRelease(root string) ([]byte, error) {
	b, err := os.ReadFile(root)
	if err != nil {
		return nil, err
	}
	env := strings.TrimSuffix(filepath.Base(root), ".yaml")
	files := []bundle.ReleaseFile{{Path: bundle.RootPath(env), Bytes: b}}
	dir := strings.TrimSuffix(root, ".yaml")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		sb, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		files = append(files, bundle.ReleaseFile{Path: bundle.ShardDir(env) + "/" + n, Bytes: sb})
	}
	return bundle.Archive(files), nil
}

// parseRelease reads (readRelease) and parses a committed release of the
// fixture repository, returning it with its archive.
func parseRelease(t *testing.T, root string) (*bundle.Manifest, []byte) {
	t.Helper()
	b, err := readRelease(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseManifest(filepath.Base(root), b)
	if err != nil {
		t.Fatal(err)
	}
	return m, b
}
