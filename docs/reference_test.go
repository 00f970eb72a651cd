package docs_test

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/configpub/configpub/internal/schemadoc"
)

var update = flag.Bool("update", false, "rewrite reference.md from the schemas")

// TestReference fails when reference.md is not what the schemas generate.
func TestReference(t *testing.T) {
	got, err := schemadoc.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("reference.md", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("reference.md")
	if err != nil {
		t.Fatalf("%v (generate it with: go test ./docs -run TestReference -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/reference.md is stale: the schemas changed; regenerate with go test ./docs -run TestReference -update")
	}
	again, err := schemadoc.Markdown()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, again) {
		t.Fatal("two generations differ: the generator is not deterministic")
	}
}
