package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/schemadoc"
)

// example is one ```yaml block of a guide whose first line is "# file: PATH".
type example struct {
	Path, Kind string
	Body       []byte
	Line       int
}

// extractExamples returns the file examples of a Markdown document.
func extractExamples(t *testing.T, md []byte) []example {
	t.Helper()
	var out []example
	var cur *example
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```yaml":
			cur = &example{Line: n}
		case cur != nil && line == "```":
			if cur.Path != "" {
				out = append(out, *cur)
			}
			cur = nil
		case cur != nil && cur.Path == "" && len(cur.Body) == 0 && strings.HasPrefix(line, "# file: "):
			cur.Path = strings.TrimPrefix(line, "# file: ")
		case cur != nil:
			if k, ok := strings.CutPrefix(line, "kind: "); ok && cur.Kind == "" {
				cur.Kind = k
			}
			cur.Body = append(cur.Body, line+"\n"...)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("unterminated code block at line %d", cur.Line)
	}
	return out
}

// TestAuthoringExamplesCompile compiles the examples of authoring.md as one
// repository: every kind must have an example, and together they must
// compile, so the guide cannot drift from the compiler.
func TestAuthoringExamplesCompile(t *testing.T) {
	md, err := os.ReadFile("authoring.md")
	if err != nil {
		t.Fatal(err)
	}
	exs := extractExamples(t, md)
	fsys := fstest.MapFS{}
	kinds := map[string]bool{}
	for _, ex := range exs {
		if _, dup := fsys[ex.Path]; dup {
			t.Fatalf("authoring.md:%d: %s has two examples", ex.Line, ex.Path)
		}
		if path.Clean(ex.Path) != ex.Path || strings.HasPrefix(ex.Path, "/") {
			t.Fatalf("authoring.md:%d: example path %q is not a clean relative path", ex.Line, ex.Path)
		}
		fsys[ex.Path] = &fstest.MapFile{Data: ex.Body, Mode: 0o644}
		kinds[ex.Kind] = true
	}
	for _, k := range schemadoc.Kinds {
		if !kinds[k.Kind] {
			t.Errorf("authoring.md has no example of kind %s", k.Kind)
		}
	}
	res, err := compiler.Compile(context.Background(), fsys, compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatalf("the examples of authoring.md do not compile: %v", err)
	}
	auds := map[string]int{}
	for _, tg := range res.Targets {
		auds[tg.Audience]++
	}
	for _, a := range []string{"agent", "gateway", "knowledge"} {
		if auds[a] == 0 {
			t.Errorf("no %s target among the compiled examples (got %v)", a, auds)
		}
	}
}

// TestExtractExamples checks the extractor itself on a small document.
func TestExtractExamples(t *testing.T) {
	md := "text\n```yaml\n# file: a/b.yaml\nkind: Host\nx: 1\n```\n```yaml\nnot: a file\n```\n```sh\n# file: c.yaml\n```\n"
	got := extractExamples(t, []byte(md))
	if len(got) != 1 || got[0].Path != "a/b.yaml" || got[0].Kind != "Host" || string(got[0].Body) != "kind: Host\nx: 1\n" || got[0].Line != 2 {
		t.Fatalf("got %+v, want one example a/b.yaml of kind Host at line 2", got)
	}
}
