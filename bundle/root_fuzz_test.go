package bundle_test

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// FuzzParseRoot: the three readers of a sharded release's root file agree.
// Whatever ParseRoot accepts, ShardRefs reads into the same shard entries
// (sorted, unique hosts, sha256 digests), and IsSharded — the byte test
// compile uses to choose between the sharded and the single-file reader —
// says sharded when it lists a shard; a root ParseRoot accepts passes
// ReleaseHeader.Validate.
func FuzzParseRoot(f *testing.F) {
	for _, p := range []string{fixture, "../fixtures/policy-repo/releases/prod.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(bytes.Replace(b, []byte("releaseVersion: 1\n"), []byte("releaseVersion: -1\n"), 1))
		f.Add(bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")))
	}
	f.Fuzz(func(t *testing.T, root []byte) {
		r, err := bundle.ParseRoot("root.yaml", root)
		if err != nil {
			return
		}
		if err := r.ReleaseHeader.Validate(); err != nil {
			t.Fatalf("accepted a root whose header is refused: %v", err)
		}
		refs, err := bundle.ShardRefs("root.yaml", root)
		if err != nil {
			t.Fatalf("ParseRoot accepts, ShardRefs refuses: %v", err)
		}
		if !reflect.DeepEqual(refs, r.Shards) {
			t.Fatalf("ShardRefs reads %+v, ParseRoot %+v", refs, r.Shards)
		}
		if len(r.Shards) > 0 && !bundle.IsSharded(root) {
			t.Fatalf("a root listing %d shards is not IsSharded", len(r.Shards))
		}
	})
}
