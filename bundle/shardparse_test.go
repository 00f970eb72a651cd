package bundle_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// benchRelease compiles a generated repository of 300 targets and returns
// its release files (root first, then a shard per host).
func benchRelease(t testing.TB) []bundle.ReleaseFile {
	t.Helper()
	res, err := compiler.Compile(context.Background(), gen.Repo(gen.Options{Targets: 300}),
		compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.SplitArchive(res.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestParseNamesTheFirstBadShard: the shards of a release are parsed on
// every core, yet with several shards broken the error is always the first
// one's in the root's order, as a sequential parse would report it.
func TestParseNamesTheFirstBadShard(t *testing.T) {
	files := benchRelease(t)
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

// TestParseReleaseReadsEachShardOnce: ParseRelease reads every shard the
// root lists exactly once, through its reader, and parses the release
// ParseFiles parses; a reader's error is returned as it is, and a shard
// the reader returns with other bytes than the root records is refused.
func TestParseReleaseReadsEachShardOnce(t *testing.T) {
	files := benchRelease(t)
	want, err := bundle.ParseFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reads := map[int]int{}
	byIndex := func(k int, ref bundle.ShardRef) (bundle.ReleaseFile, error) {
		mu.Lock()
		reads[k]++
		mu.Unlock()
		if f := files[k+1]; f.Path != bundle.ShardPath("bench", ref.Host) {
			return f, fmt.Errorf("shard %d is %s, the root lists %s", k, f.Path, ref.Host)
		}
		return files[k+1], nil
	}
	got, err := bundle.ParseRelease(files[0], byIndex)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("ParseRelease and ParseFiles parse the same files differently")
	}
	if len(reads) != len(files)-1 {
		t.Fatalf("%d shards read, want %d", len(reads), len(files)-1)
	}
	for k, n := range reads {
		if n != 1 {
			t.Fatalf("shard %d read %d times", k, n)
		}
	}

	gone := errors.New("shard gone")
	_, err = bundle.ParseRelease(files[0], func(k int, ref bundle.ShardRef) (bundle.ReleaseFile, error) {
		if k == 2 {
			return bundle.ReleaseFile{}, gone
		}
		return files[k+1], nil
	})
	if err != gone {
		t.Fatalf("reader's error: got %v, want it as it is", err)
	}

	_, err = bundle.ParseRelease(files[0], func(k int, ref bundle.ShardRef) (bundle.ReleaseFile, error) {
		f := files[k+1]
		if k == 1 {
			f.Bytes = append([]byte("# edited\n"), f.Bytes...)
		}
		return f, nil
	})
	if !errors.Is(err, bundle.ErrDigestMismatch) || !strings.Contains(err.Error(), files[2].Path) {
		t.Fatalf("shard with other bytes: %v, want a digest mismatch naming %s", err, files[2].Path)
	}
}

// TestParsedTargetsShareCommonStrings: the strings most targets of a
// parsed release have in common (publication id, lease times, audience,
// lease profile, property-set digest) are held once, not once per target.
func TestParsedTargetsShareCommonStrings(t *testing.T) {
	m, err := bundle.ParseFiles(benchRelease(t))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]func(*bundle.TargetEntry) string{
		"publicationId":     func(e *bundle.TargetEntry) string { return e.PublicationID },
		"refreshAfter":      func(e *bundle.TargetEntry) string { return e.RefreshAfter },
		"expiresAt":         func(e *bundle.TargetEntry) string { return e.ExpiresAt },
		"audience":          func(e *bundle.TargetEntry) string { return e.Audience },
		"leaseProfile":      func(e *bundle.TargetEntry) string { return e.LeaseProfile },
		"propertySetDigest": func(e *bundle.TargetEntry) string { return e.PropertySetDigest },
	}
	for name, get := range fields {
		copies := map[string]map[*byte]bool{} // value → distinct backing arrays
		for i := range m.Targets {
			v := get(&m.Targets[i])
			if copies[v] == nil {
				copies[v] = map[*byte]bool{}
			}
			copies[v][unsafe.StringData(v)] = true
		}
		shared := false
		for v, at := range copies {
			if len(at) != 1 {
				t.Errorf("%s %q is held %d times", name, v, len(at))
			}
			shared = shared || len(copies) < len(m.Targets)
		}
		if !shared {
			t.Errorf("%s: every target has its own value; the test needs shared ones", name)
		}
	}
}
