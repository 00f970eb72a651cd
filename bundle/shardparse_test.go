package bundle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// TestParseNamesTheFirstBadShard: the shards of a release are parsed on
// every core, yet with several shards broken the error is always the first
// one's in the root's order, as a sequential parse would report it.
func TestParseNamesTheFirstBadShard(t *testing.T) {
	res, err := compiler.Compile(context.Background(), gen.Repo(gen.Options{Targets: 300}),
		compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.SplitArchive(res.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("%d files: the test needs several shards", len(files))
	}
	if m, err := bundle.ParseFiles(files); err != nil || len(m.Targets) != 300 {
		t.Fatalf("intact release: %v", err)
	}
	broken := func(f bundle.ReleaseFile) bundle.ReleaseFile {
		f.Bytes = []byte(strings.Replace(string(f.Bytes), "sha256:", "sha256:0", 1))
		return f
	}
	for round := range 20 {
		bad := append([]bundle.ReleaseFile(nil), files...)
		for _, k := range []int{len(files) - 1, 2, 4} {
			bad[k] = broken(bad[k])
		}
		_, err := bundle.ParseFiles(bad)
		if !errors.Is(err, bundle.ErrDigestMismatch) || !strings.Contains(err.Error(), files[2].Path+" digests to") {
			t.Fatalf("round %d: %v, want the digest mismatch of %s", round, err, files[2].Path)
		}
	}
}
