package compiler

import (
	"context"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/gen"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/schemas"
)

// TestCompileLetsGoOfEachHostsDocuments: once a derivation has compiled a
// host, nothing holds that host's documents any more; the compilation
// keeps only what the release as a whole needs (the Agents workflows
// allow, for the workflow views), so compiling a large environment does
// not hold every host's documents until the end. Weak pointers to every
// tool, skill, model alias, knowledge base, Gateway and Agent tell which
// documents are still reachable after the compile.
func TestCompileLetsGoOfEachHostsDocuments(t *testing.T) {
	ctx := context.Background()
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	ss, err := loadSources(ctx, policytree.New(os.DirFS("../fixtures/policy-repo"), policytree.Limits{}), set, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel(ss)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]func() bool{} // kind/name -> still reachable
	watch(held, KindTool, m.tools)
	watch(held, KindSkill, m.skills)
	watch(held, KindModelAlias, m.models)
	watch(held, KindKnowledgeBase, m.kbs)
	watch(held, KindGateway, m.gateways)
	watch(held, KindAgent, m.agents)
	allowed := map[string]bool{} // Agents some workflow version allows
	for _, w := range m.workflows {
		for _, v := range w.spec.Versions {
			for _, a := range v.Agents {
				allowed[KindAgent+"/"+a] = true
			}
		}
	}
	if len(allowed) == 0 || len(allowed) == len(m.agents) {
		t.Fatalf("the fixture's workflows allow %d of %d Agents: the test needs some allowed and some not", len(allowed), len(m.agents))
	}

	c := &compilation{m: m, env: "prod", set: set, createdAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), next: 1, manifestOnly: true}
	res, err := c.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m = nil
	runtime.GC()
	runtime.GC()
	var kept, freed []string
	for name, reachable := range held {
		if reachable() {
			kept = append(kept, name)
		} else {
			freed = append(freed, name)
		}
	}
	sort.Strings(kept)
	for _, name := range kept {
		if !allowed[name] {
			t.Errorf("%s is still held after the compile", name)
		}
	}
	for _, name := range freed {
		if allowed[name] {
			t.Errorf("%s, which a workflow allows, was let go before the workflow views", name)
		}
	}
	if len(freed) < len(held)/2 {
		t.Errorf("let go of %d of %d documents", len(freed), len(held))
	}
	for i, p := range c.parts {
		if p != nil {
			t.Errorf("host %d's part of the model is still held", i)
		}
	}
	if c.m.src.byKind != nil {
		t.Error("the documents' index is still held")
	}
	again := &compilation{m: c.m, env: "prod", set: set, createdAt: c.createdAt, next: 1, manifestOnly: true}
	if _, err := again.run(ctx); err == nil || !strings.Contains(err.Error(), "a model compiles once") {
		t.Errorf("compiling the let-go model again: %v, want an error saying a model compiles once", err)
	}
	runtime.KeepAlive(res)
}

// watch records, for every entry of a kind, whether it is still reachable.
func watch[T any](held map[string]func() bool, kind string, all map[string]*entry[T]) {
	for name, e := range all {
		p := weak.Make(e)
		held[kind+"/"+name] = func() bool { return p.Value() != nil }
	}
}

// TestTargetDocumentsLetGoAsTheirHostCompiles: a target's document is read
// while its host compiles; what the release's root needs of it stays in
// the spec, and the document is let go with the host (not held to the end
// of a large environment). Weak pointers to every Target document tell,
// when the last host hands over its first target, that none of an earlier
// host is held.
func TestTargetDocumentsLetGoAsTheirHostCompiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := gen.Write(dir, gen.Options{Targets: 36, AgentsPerHost: 10, EnvTag: "bench"}); err != nil {
		t.Fatal(err)
	}
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	ss, err := loadSources(ctx, policytree.New(os.DirFS(dir), policytree.Limits{}), set, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := buildModel(ss)
	if err != nil {
		t.Fatal(err)
	}
	type watched struct {
		name, host string
		held       func() bool
	}
	var docs []watched
	last := ""
	for name, e := range m.targets {
		p := weak.Make(e.src)
		docs = append(docs, watched{name, e.spec.Host, func() bool { return p.Value() != nil }})
		last = max(last, e.spec.Host)
	}
	hosts := map[string]bool{}
	for _, d := range docs {
		hosts[d.host] = true
	}
	if len(hosts) < 3 {
		t.Fatalf("%d hosts; the test needs three", len(hosts))
	}
	c := &compilation{m: m, env: "bench", set: set, createdAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), next: 1, manifestOnly: true}
	m = nil
	checked := false
	c.emit = func(tg *Target) error {
		if tg.Host != last || checked {
			return nil
		}
		checked = true
		runtime.GC()
		runtime.GC()
		for _, d := range docs {
			if d.host != last && d.held() {
				t.Errorf("target %s of host %s is still held when host %s hands over its targets", d.name, d.host, last)
			}
		}
		return nil
	}
	if _, err := c.run(ctx); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatalf("host %s handed over no target", last)
	}
}

// TestReadInputsMarksSharedFiles: an input the targets of two hosts read is
// shared (listed in the root); one host's stays with it, whichever order
// the hosts finish in; a malformed digest is refused with its path.
func TestReadInputsMarksSharedFiles(t *testing.T) {
	a, b := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		c := &compilation{env: "dev", inputs: map[string]readInput{}}
		read := []files{{"shared.yaml": a, "zero.yaml": b}, {"shared.yaml": a, "one.yaml": a}}
		for _, hi := range order {
			if err := c.readInputs(hi, read[hi]); err != nil {
				t.Fatal(err)
			}
		}
		for path, want := range map[string]int32{"shared.yaml": sharedInput, "zero.yaml": 0, "one.yaml": 1} {
			if got := c.inputs[path].host; got != want {
				t.Errorf("hosts in order %v: %s on host %d, want %d", order, path, got, want)
			}
		}
		if got := digest.FromSum(c.inputs["zero.yaml"].sum).String(); got != b {
			t.Errorf("zero.yaml's digest %s, want %s", got, b)
		}
	}
	c := &compilation{env: "dev", inputs: map[string]readInput{}}
	if err := c.readInputs(0, files{"bad.yaml": "sha256:xyz"}); err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("a malformed digest: %v, want an error naming bad.yaml", err)
	}
}
