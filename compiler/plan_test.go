package compiler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

func TestPlanListsExactlyTheChangedTargets(t *testing.T) {
	base := compileFixture(t, "dev")
	dir := copyRepo(t)
	edit(t, filepath.Join(dir, "agents/advisor.yaml"), "maxToolCallsPerTurn: 4", "maxToolCallsPerTurn: 6")
	head := compileDir(t, dir, "dev")
	p, err := compiler.NewPlan(base, head, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, c := range p.Changed {
		got[c.ServiceID] = c.Modified
		if c.Change != "changed" || c.Digests["artifactDigest"].Old == "" || c.Digests["artifactDigest"].New == "" {
			t.Errorf("%s: change %s digests %v", c.ServiceID, c.Change, c.Digests)
		}
	}
	if p.Unchanged != 2 || len(p.Changed) != 3 {
		t.Fatalf("got %d changed, %d unchanged; want 3 and 2: %v", len(p.Changed), p.Unchanged, got)
	}
	if want := []string{"/agentPolicy/model/maxToolCallsPerTurn"}; !reflect.DeepEqual(got["com.networknt.agent-advisor-1.0.0"], want) {
		t.Errorf("advisor paths %v, want %v", got["com.networknt.agent-advisor-1.0.0"], want)
	}
	for _, svc := range []string{"com.networknt.light-gateway-1.0.0", "com.networknt.knowledge-1.0.0"} {
		if len(got[svc]) == 0 {
			t.Errorf("%s listed without paths", svc)
		}
	}
	var js bytes.Buffer
	if err := p.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back compiler.Plan
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Changed) != 3 {
		t.Errorf("json plan does not round-trip: %v", err)
	}
}

func TestPlanSettingsPaths(t *testing.T) {
	base := compileFixture(t, "prod")
	dir := copyRepo(t)
	edit(t, filepath.Join(dir, "targets/prod/account.yaml"), "maxPoolSize: 80", "maxPoolSize: 60")
	head := compileDir(t, dir, "prod")
	p, err := compiler.NewPlan(base, head, "")
	if err != nil {
		t.Fatal(err)
	}
	// The account target gets a new publication, so the Gateway and
	// Knowledge targets accept it: they change only in acceptedPublications.
	if len(p.Changed) != 3 || !reflect.DeepEqual(p.Changed[0].Modified, []string{"/operationalStore.maxPoolSize"}) {
		t.Fatalf("got %+v, want the account target with /operationalStore.maxPoolSize first", p.Changed)
	}
	for _, c := range p.Changed[1:] {
		for _, path := range append(append([]string{}, c.Added...), c.Modified...) {
			if !strings.Contains(path, "/acceptedPublications/") {
				t.Errorf("%s: unexpected path %s", c.ServiceID, path)
			}
		}
	}
	if _, ok := p.Changed[0].Digests["policyDigest"]; ok {
		t.Errorf("a settings change reported a policyDigest change")
	}
}

// TestPlanOfManifestOnlyCompiles: compiled for their manifests and then
// again host by host keeping only the targets that differ (PlanTargets), two
// releases give the plan their fully compiled selves give, holding only the
// changed targets; a plan asked of compiles that do not hold a changed
// target says so rather than report it unchanged.
func TestPlanOfManifestOnlyCompiles(t *testing.T) {
	dir := copyRepo(t)
	edit(t, filepath.Join(dir, "agents/advisor.yaml"), "maxToolCallsPerTurn: 4", "maxToolCallsPerTurn: 6")
	compile := func(dir string, manifestOnly bool) *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "dev",
			CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: manifestOnly})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	want, err := compiler.NewPlan(compile(fixtureRepo, false), compile(dir, false), "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	base, head := compile(fixtureRepo, true), compile(dir, true)
	if _, err := compiler.NewPlan(base, head, "HEAD"); err == nil || !strings.Contains(err.Error(), "does not hold it") {
		t.Fatalf("plan of compiles holding no targets: %v, want an error", err)
	}
	if err := compiler.PlanTargets(context.Background(), base, head); err != nil {
		t.Fatal(err)
	}
	if len(base.Targets) != 3 || len(head.Targets) != 3 {
		t.Fatalf("PlanTargets kept %d base and %d new targets, want the 3 that changed", len(base.Targets), len(head.Targets))
	}
	got, err := compiler.NewPlan(base, head, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || len(got.Changed) != 3 || got.Unchanged != 2 {
		t.Fatalf("plan of manifest-only compiles:\n%+v\nwant\n%+v", got, want)
	}
}
