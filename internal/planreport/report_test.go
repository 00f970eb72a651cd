package planreport_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/fixtures"
	"github.com/configpub/configpub/internal/planreport"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// createdAt of every new release in these tests.
var createdAt = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// fixtureFS is the sample policy repository in memory.
func fixtureFS(t *testing.T) fstest.MapFS {
	t.Helper()
	src, err := fixtures.PolicyRepo()
	if err != nil {
		t.Fatal(err)
	}
	m := fstest.MapFS{}
	err = fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, p)
		m[p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func edit(t *testing.T, m fstest.MapFS, file, old, new string) {
	t.Helper()
	s := string(m[file].Data)
	if !strings.Contains(s, old) {
		t.Fatalf("%s has no %q", file, old)
	}
	m[file] = &fstest.MapFile{Data: []byte(strings.Replace(s, old, new, 1)), Mode: 0o644}
}

func compile(t *testing.T, fsys fs.FS) *compiler.Result {
	t.Helper()
	res, err := compiler.Compile(context.Background(), fsys, compiler.Options{EnvTag: "dev", CreatedAt: createdAt})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func report(t *testing.T, baseFS, headFS fs.FS) *planreport.Report {
	t.Helper()
	return reportAt(t, baseFS, headFS, "main")
}

func reportAt(t *testing.T, baseFS, headFS fs.FS, baseRef string) *planreport.Report {
	t.Helper()
	base, head := compile(t, baseFS), compile(t, headFS)
	p, err := compiler.NewPlan(base, head, baseRef)
	if err != nil {
		t.Fatal(err)
	}
	r, err := planreport.New(planreport.Input{Plan: p, Base: base, Head: head, BaseFS: baseFS, HeadFS: headFS})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func golden(t *testing.T, name string, r *planreport.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".md")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("%s differs from the golden file (go test -update to accept):\n%s", path, b.String())
	}
	return b.String()
}

func target(t *testing.T, r *planreport.Report, serviceID string) planreport.Target {
	t.Helper()
	for _, c := range r.Changed {
		if c.ServiceID == serviceID {
			return c
		}
	}
	t.Fatalf("%s not in the plan", serviceID)
	return planreport.Target{}
}

const (
	techSupport = "com.networknt.agent-tech-support-1.0.0"
	advisor     = "com.networknt.agent-advisor-1.0.0"
	gateway     = "com.networknt.light-gateway-1.0.0"
)

func TestValueChange(t *testing.T) {
	base := fixtureFS(t)
	head := fixtureFS(t)
	edit(t, head, "agents/tech-support.yaml", "maxOutputTokens: 2048", "maxOutputTokens: 1024")
	r := report(t, base, head)
	md := golden(t, "value-change", r)
	v := target(t, r, techSupport).Values
	if len(v) != 1 || v[0].Path != "/agentPolicy/model/maxOutputTokens" || string(v[0].Old) != "2048" || string(v[0].New) != "1024" ||
		v[0].Source != "agents/tech-support.yaml:17" {
		t.Errorf("values %+v, want maxOutputTokens 2048 -> 1024 from agents/tech-support.yaml:17", v)
	}
	if !strings.HasPrefix(md, "<!-- configpub-plan env=dev -->\n") {
		t.Errorf("comment does not start with the environment's marker")
	}
	if !strings.Contains(md, "<details><summary>digests</summary>") || r.DigestsFinal || r.Provisional == "" {
		t.Errorf("digests not folded, or an uncompiled change not marked provisional")
	}
}

func TestPromptChange(t *testing.T) {
	base := fixtureFS(t)
	head := fixtureFS(t)
	edit(t, head, "agents/tech-support.yaml", "step by step with the support knowledge base", "step by step, citing the support knowledge base,")
	r := report(t, base, head)
	golden(t, "prompt-change", r)
	v := target(t, r, techSupport).Values
	if len(v) != 1 || v[0].Path != "/agentPolicy/prompt" || v[0].Source != "agents/tech-support.yaml:12" ||
		!strings.Contains(v[0].Diff, "\n-step by step with the support knowledge base") ||
		!strings.Contains(v[0].Diff, "\n+step by step, citing the support knowledge base,") {
		t.Errorf("prompt change not shown as a diff with its source: %+v", v)
	}
}

func TestDependentTarget(t *testing.T) {
	base := fixtureFS(t)
	head := fixtureFS(t)
	edit(t, head, "tools/reset-device.yaml", "approval: required", "approval: none")
	r := report(t, base, head)
	golden(t, "dependent-target", r)
	for _, svc := range []string{techSupport, gateway} {
		c := target(t, r, svc)
		found := false
		for _, b := range c.Because {
			found = found || (b.Kind == "Tool" && b.Name == "reset-device" && b.File == "tools/reset-device.yaml" && b.Line > 0)
		}
		if !found {
			t.Errorf("%s: because %+v, want Tool reset-device", svc, c.Because)
		}
	}
	// A dependent target of an Agent change names the Agent.
	head = fixtureFS(t)
	edit(t, head, "agents/tech-support.yaml", "maxOutputTokens: 2048", "maxOutputTokens: 1024")
	g := target(t, report(t, base, head), gateway)
	if len(g.Because) != 1 || g.Because[0].Kind != "Agent" || g.Because[0].Name != "tech-support" {
		t.Errorf("gateway because %+v, want Agent tech-support", g.Because)
	}
}

func TestAddedAndRetiredTargets(t *testing.T) {
	with := fixtureFS(t)
	without := fixtureFS(t)
	delete(without, "targets/dev/advisor.yaml")
	r := report(t, with, without)
	golden(t, "retired-target", r)
	c := target(t, r, advisor)
	if c.Change != "retired" || r.RetiredTargets != 1 || c.Declared != "targets/dev/advisor.yaml" || c.Values != nil {
		t.Errorf("retired target: %+v", c)
	}
	// Added: release 2 (committed, without the target) -> release 3.
	res := compile(t, without)
	files, err := bundle.SplitArchive(res.ManifestBytes) // the root and its shards
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		without[f.Path] = &fstest.MapFile{Data: f.Bytes, Mode: 0o644}
		with[f.Path] = &fstest.MapFile{Data: f.Bytes, Mode: 0o644}
	}
	r = report(t, without, with)
	golden(t, "added-target", r)
	if r.BaseRelease != 2 || r.Release != 3 {
		t.Errorf("release %d -> %d, want 2 -> 3", r.BaseRelease, r.Release)
	}
	c = target(t, r, advisor)
	if c.Change != "added" || r.AddedTargets != 1 || c.Declared != "targets/dev/advisor.yaml" {
		t.Errorf("added target: %+v", c)
	}
}

func TestMarkdownEscapesValues(t *testing.T) {
	base := fixtureFS(t)
	head := fixtureFS(t)
	// A hostile prompt tries to close the diff's code fence and the details.
	edit(t, head, "agents/tech-support.yaml", "step by step with", "step by step ```\n    </details><img src=x> with")
	var b bytes.Buffer
	if err := report(t, base, head).WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if !strings.Contains(md, "````diff\n") {
		t.Errorf("diff fence not longer than the backticks inside:\n%s", md)
	}
}

// TestWorkflowFindsItsComment: the shipped pull-request workflow looks for
// exactly the marker the comment starts with, per environment.
func TestWorkflowFindsItsComment(t *testing.T) {
	b, err := os.ReadFile("../../examples/github-workflows/policy-pr.yml")
	if err != nil {
		t.Fatal(err)
	}
	if want := `MARKER: "` + planreport.Marker("${{ matrix.env }}") + `"`; !strings.Contains(string(b), want) {
		t.Errorf("policy-pr.yml does not set %s", want)
	}
}

// TestKnowledgeInventoryChangeIsKeyed: an index generation replaced in the
// middle of a Knowledge replica inventory is shown as that item removed and
// the new one added, compared by (kind, id); it was shown as the id of every
// item after it changing ("items/4/id: product-docs/11 -> product-docs/12").
func TestKnowledgeInventoryChangeIsKeyed(t *testing.T) {
	base := fixtureFS(t)
	head := fixtureFS(t)
	edit(t, head, "knowledge/product-docs.yaml", "indexGenerations: [11, 12]", "indexGenerations: [12, 13]")
	r := report(t, base, head)
	var removed, added bool
	for _, v := range target(t, r, "com.networknt.knowledge-1.0.0").Values {
		if !strings.Contains(v.Path, "/inventory/items/") {
			continue
		}
		switch {
		case v.Old != nil && v.New != nil && strings.HasSuffix(v.Path, "/digest"):
			// An item of the same kind and id whose content changed (the
			// knowledge base, whose generations changed), in place.
		case v.Old != nil && v.New != nil:
			t.Errorf("inventory item %s changed %s -> %s: items are compared by position", v.Path, v.Old, v.New)
		case v.New == nil && strings.Contains(string(v.Old), `"id":"product-docs/11"`):
			removed = true
		case v.Old == nil && strings.Contains(string(v.New), `"id":"product-docs/13"`):
			added = true
		default:
			t.Errorf("inventory item %s: %s -> %s, want only product-docs/11 removed and product-docs/13 added", v.Path, v.Old, v.New)
		}
	}
	if !removed || !added {
		t.Errorf("plan does not show generation 11 removed (%v) and 13 added (%v)", removed, added)
	}
}

// TestReorderedListSetting: a list setting only reordered showed the
// target's digests without a value row when its items have an identity
// (compared by key, items that only moved are no change) and one row per
// position otherwise; each is now one row, the list before and after,
// marked reordered, with its source line.
func TestReorderedListSetting(t *testing.T) {
	const (
		at      = "      cache:\n        ttl: 30s\n        enabled: true\n"
		lists   = "      routes:\n        - {agent: account, weight: 1}\n        - {agent: tech-support, weight: 2}\n      cors:\n        allowedOrigins: [https://a.example, https://b.example, https://c.example]\n"
		swapped = "      routes:\n        - {agent: tech-support, weight: 2}\n        - {agent: account, weight: 1}\n      cors:\n        allowedOrigins: [https://c.example, https://a.example, https://b.example]\n"
	)
	base := fixtureFS(t)
	edit(t, base, "environments/dev.yaml", at, at+lists)
	// The lists committed in release 2, the base of the change.
	files, err := bundle.SplitArchive(compile(t, base).ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	head := fixtureFS(t)
	for _, f := range files {
		base[f.Path] = &fstest.MapFile{Data: f.Bytes, Mode: 0o644}
		head[f.Path] = &fstest.MapFile{Data: f.Bytes, Mode: 0o644}
	}
	edit(t, head, "environments/dev.yaml", at, at+swapped)
	r := report(t, base, head)
	golden(t, "reordered-list", r)
	if len(r.Changed) != 1 {
		t.Fatalf("%d targets changed, want the gateway only", len(r.Changed))
	}
	v := target(t, r, gateway).Values
	if len(v) != 2 || v[0].Path != "/cors.allowedOrigins" || v[1].Path != "/routes" {
		t.Fatalf("values %+v, want one row per list", v)
	}
	for _, c := range v {
		if !c.Reordered || c.Old == nil || c.New == nil || c.Source == "" {
			t.Errorf("%s: %+v, want the list before and after, reordered, with its source", c.Path, c)
		}
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil || !strings.Contains(b.String(), "~ /routes: ") || !strings.Contains(b.String(), " (reordered)") {
		t.Errorf("text: %v\n%s", err, b.String())
	}
}

// fullAfter is a writer that takes n bytes and then fails as a full disk.
type fullAfter struct{ n int }

func (f *fullAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, syscall.ENOSPC
	}
	f.n -= len(p)
	return len(p), nil
}

// TestWriteFailsWhenTheOutputDoes: a text or markdown plan whose output
// fails part way (a full disk under `plan -o markdown > plan.md`, a closed
// pipe) returns the error, so plan exits 1; every line's error was
// dropped and a cut-short plan exited 0, to be posted as the PR comment.
func TestWriteFailsWhenTheOutputDoes(t *testing.T) {
	base := fixtureFS(t)
	head := fixtureFS(t)
	edit(t, head, "agents/tech-support.yaml", "maxOutputTokens: 2048", "maxOutputTokens: 1024")
	r := report(t, base, head)
	for name, write := range map[string]func(io.Writer) error{"text": r.WriteText, "markdown": r.WriteMarkdown} {
		var whole bytes.Buffer
		if err := write(&whole); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, whole.Len() / 2, whole.Len() - 1} {
			if err := write(&fullAfter{n: n}); !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("%s, output full after %d of %d bytes: got %v, want ENOSPC", name, n, whole.Len(), err)
			}
		}
	}
}
