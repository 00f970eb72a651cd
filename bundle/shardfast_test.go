package bundle_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// TestRenderedShardsReadWithoutYAML: every shard a compile renders (rows
// with and without trailing maps, Knowledge inventories among them) is
// read by the direct reader, into exactly what the YAML path decodes.
func TestRenderedShardsReadWithoutYAML(t *testing.T) {
	files := benchRelease(t)
	extras := 0
	// A list without rows is rendered "key: []".
	noWorkflows := bundle.ReleaseFile{Path: "no workflows", Bytes: []byte(withoutRows(string(files[1].Bytes), "workflows", "workflows: []\n"))}
	if !strings.Contains(string(noWorkflows.Bytes), "\nworkflows: []\ntargets:\n") {
		t.Fatal("the shard has no workflows to remove")
	}
	for _, f := range append(files[1:], noWorkflows) {
		fast, ok, strict, err := bundle.DecodeShardBothWays(f.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		if !ok {
			t.Fatalf("%s: the direct reader refused a shard as compile renders it", f.Path)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("%s: the direct reader decodes\n%+v\nthe YAML path\n%+v", f.Path, fast, strict)
		}
		extras += strings.Count(string(f.Bytes), `,{"`)
	}
	if extras == 0 {
		t.Fatal("no row with a trailing map: the release does not exercise them")
	}
}

// withoutRows replaces list's key line and rows in shard b with head.
func withoutRows(b, list, head string) string {
	i := strings.Index(b, "\n"+list+":\n") + 1
	j := i + len(list) + 2
	for strings.HasPrefix(b[j:], "  - ") {
		j += strings.Index(b[j:], "\n") + 1
	}
	return b[:i] + head + b[j:]
}

// shardVariants rewrites a rendered shard into forms that are still YAML
// (most of them valid shards) but not the form compile renders.
func shardVariants(b string) map[string]string {
	row := strings.Index(b, "  - [")
	first := b[row : row+strings.Index(b[row:], "\n")+1]
	return map[string]string{
		"comment":             "# a comment\n" + b,
		"header order":        strings.Replace(strings.Replace(b, "apiVersion:", "APIVERSION:", 1), "kind:", "apiVersion:", 1),
		"plain header value":  strings.Replace(b, `kind: "ReleaseShard"`, "kind: ReleaseShard", 1),
		"space in a row":      strings.Replace(b, `",`, `", `, 1),
		"escaped character":   strings.Replace(b, `"Agent/`, `"\u0041gent/`, 1),
		"non-ASCII":           strings.Replace(b, `"Agent/h`, `"Agent/é`, 1),
		"negative zero":       strings.Replace(b, `",1,"`, `",-0,"`, 1),
		"leading zero":        strings.Replace(b, `",1,"`, `",01,"`, 1),
		"fraction":            strings.Replace(b, `",1,"`, `",1.0,"`, 1),
		"exponent":            strings.Replace(b, `",1,"`, `",1e0,"`, 1),
		"beyond 2^53":         strings.Replace(b, `",1,"`, `",9007199254740993,"`, 1),
		"unsorted keys":       strings.Replace(b, `{"inventory":`, `{"zz":1,"inventory":`, 1),
		"duplicate keys":      strings.Replace(b, `{"inventory":`, `{"inventory":[],"inventory":`, 1),
		"tab in a string":     strings.Replace(b, `"Agent/`, "\"\tAgent/", 1),
		"CRLF":                strings.ReplaceAll(b, "\n", "\r\n"),
		"no final newline":    strings.TrimSuffix(b, "\n"),
		"trailing document":   b + "---\nkind: x\n",
		"trailing field":      b + "extra: 1\n",
		"rows indented more":  strings.ReplaceAll(b, "\n  - [", "\n    - ["),
		"list without rows":   withoutRows(b, "workflows", "workflows:\n"),
		"block row":           strings.Replace(b, first, "  - - \"x\"\n", 1),
		"unterminated string": strings.Replace(b, `"sha256:`, `"sha256`+"\n", 1),
	}
}

// TestShardsInAnotherFormTakeTheYAMLPath: a shard in any other form than
// compile renders — valid YAML or not, a valid shard or not — is not read
// by the direct reader, so the YAML path reads it or names what is wrong.
func TestShardsInAnotherFormTakeTheYAMLPath(t *testing.T) {
	files := benchRelease(t)
	var b string
	for _, f := range files[1:] {
		if strings.Contains(string(f.Bytes), `{"inventory":`) && strings.Contains(string(f.Bytes), "\nworkflows:\n  - [") {
			b = string(f.Bytes)
			break
		}
	}
	if b == "" {
		t.Fatal("no shard with an inventory and workflows")
	}
	for name, v := range shardVariants(b) {
		if v == b {
			t.Fatalf("%s: the variant did not change the shard", name)
		}
		if _, ok, _, _ := bundle.DecodeShardBothWays([]byte(v)); ok {
			t.Errorf("%s: read by the direct reader", name)
		}
	}
}

// FuzzShardRendered: whatever the direct reader reads, the YAML path reads
// too, into the same document.
func FuzzShardRendered(f *testing.F) {
	files := benchRelease(f)
	for _, sf := range files[1:4] {
		f.Add(sf.Bytes)
		for _, v := range shardVariants(string(sf.Bytes)) {
			f.Add([]byte(v))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fast, ok, strict, err := bundle.DecodeShardBothWays(in)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("the direct reader read what the YAML path refuses: %v", err)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("the direct reader decodes\n%+v\nthe YAML path\n%+v", fast, strict)
		}
	})
}

// BenchmarkDecodeShard decodes the shards of a 300-target release as
// compile renders them, read directly ("rendered") and, as the baseline
// doing the same work, through the strict YAML path ("yaml"): both yield
// the same document (TestRenderedShardsReadWithoutYAML).
func BenchmarkDecodeShard(b *testing.B) {
	shards := benchRelease(b)[1:]
	size := 0
	for _, f := range shards {
		size += len(f.Bytes)
	}
	b.Run("rendered", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			for _, f := range shards {
				if _, ok := bundle.DecodeShardRendered(f.Bytes); !ok {
					b.Fatalf("%s: not read directly", f.Path)
				}
			}
		}
	})
	b.Run("yaml", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			for _, f := range shards {
				if err := bundle.DecodeShardStrict(f.Bytes); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
