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

	"github.com/configpub/configpub/bundle"
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

// TestPlanKeepHoldsTheChangedTargets: a manifest-only compile with
// Keep = PlanKeep(base) holds the targets that differ from base, in
// manifest order, exactly as a full compile renders them, and PlanTargets
// does not compile it again (the sources changed since: a second compile
// would be refused).
func TestPlanKeepHoldsTheChangedTargets(t *testing.T) {
	dir := copyRepo(t)
	edit(t, filepath.Join(dir, "agents/advisor.yaml"), "maxToolCallsPerTurn: 4", "maxToolCallsPerTurn: 6")
	opts := compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)}
	compile := func(dir string, opts compiler.Options) *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	full := compile(dir, opts)
	want, err := compiler.NewPlan(compile(fixtureRepo, opts), full, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	opts.ManifestOnly = true
	base := compile(fixtureRepo, opts)
	opts.Keep = compiler.PlanKeep(base)
	head := compile(dir, opts)

	var wantHeld []compiler.Target
	differs := compiler.PlanKeep(base)
	for i := range full.Manifest.Targets {
		if differs(&full.Manifest.Targets[i]) {
			wantHeld = append(wantHeld, full.Targets[i])
		}
	}
	if len(wantHeld) != 3 {
		t.Fatalf("%d targets differ from the base, want 3", len(wantHeld))
	}
	if !reflect.DeepEqual(head.Targets, wantHeld) {
		t.Fatalf("a compile with Keep holds %d targets, want the %d that differ as a full compile renders them", len(head.Targets), len(wantHeld))
	}

	edit(t, filepath.Join(dir, "agents/advisor.yaml"), "maxToolCallsPerTurn: 6", "maxToolCallsPerTurn: 7")
	if err := compiler.PlanTargets(context.Background(), base, head); err != nil {
		t.Fatalf("PlanTargets compiled the head again: %v", err)
	}
	if len(base.Targets) != 3 || !reflect.DeepEqual(head.Targets, wantHeld) {
		t.Fatalf("PlanTargets kept %d base and %d new targets, want the 3 that changed", len(base.Targets), len(head.Targets))
	}
	got, err := compiler.NewPlan(base, head, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plan of a compile with Keep:\n%+v\nwant\n%+v", got, want)
	}
}

// TestCommittedChangesLetTheBaseCompileOnce: when the head commits the
// release its sources compile to, the hosts whose committed shards differ
// hold every target that differs, so a base compiled keeping their targets
// is not compiled again by PlanTargets (its sources changed since: that
// would be refused); when the head's release is not compiled yet, no host
// differs and PlanTargets compiles the base's hosts again. Each holds also
// when both results let go of their entries first (ForStreaming).
func TestCommittedChangesLetTheBaseCompileOnce(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	baseDir, dir := copyRepo(t), copyRepo(t)
	edit(t, filepath.Join(dir, "agents/advisor.yaml"), "maxToolCallsPerTurn: 4", "maxToolCallsPerTurn: 6")
	if got := compiler.CommittedChanges(os.DirFS(baseDir), os.DirFS(dir), "dev"); got == nil || len(got) != 0 {
		t.Fatalf("committed changes before the head's release is compiled: %v, want none", got)
	}
	res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "dev", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if err := compiler.Write(ctx, res, dir, ""); err != nil {
		t.Fatal(err)
	}
	hosts := compiler.CommittedChanges(os.DirFS(baseDir), os.DirFS(dir), "dev")
	if !reflect.DeepEqual(hosts, map[string]bool{"dev.lightapi.net": true}) {
		t.Fatalf("committed changes: %v, want the advisor's host", hosts)
	}
	if got := compiler.CommittedChanges(os.DirFS(baseDir), os.DirFS(t.TempDir()), "dev"); got != nil {
		t.Fatalf("committed changes against a tree without a release: %v, want nil", got)
	}

	opts := compiler.Options{EnvTag: "dev", CreatedAt: at}
	want, err := compiler.NewPlan(mustCompile(t, baseDir, opts), mustCompile(t, dir, opts), "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	// With stream, each result lets go of its manifest's entries as soon
	// as it is compiled (ForStreaming), as the CLI's plan does: what the
	// plan reads of them — each target's artifact digest — is kept.
	plan := func(keepBase func(*bundle.TargetEntry) bool, editBase, stream bool) (*compiler.Plan, error) {
		opts := compiler.Options{EnvTag: "dev", CreatedAt: at, ManifestOnly: true, Keep: keepBase}
		base := mustCompile(t, baseDir, opts)
		if stream {
			base.ForStreaming()
			if base.Manifest.Targets != nil || base.TargetCount() != 5 {
				t.Fatalf("a streamed base holds %d entries of %d targets, want none", len(base.Manifest.Targets), base.TargetCount())
			}
		}
		opts.Keep = compiler.PlanKeep(base)
		head := mustCompile(t, dir, opts)
		if stream {
			head.ForStreaming()
		}
		if editBase {
			edit(t, filepath.Join(baseDir, "agents/advisor.yaml"), "maxToolCallsPerTurn: 4", "maxToolCallsPerTurn: 5")
			defer edit(t, filepath.Join(baseDir, "agents/advisor.yaml"), "maxToolCallsPerTurn: 5", "maxToolCallsPerTurn: 4")
		}
		if err := compiler.PlanTargets(ctx, base, head); err != nil {
			return nil, err
		}
		return compiler.NewPlan(base, head, "HEAD")
	}
	for _, stream := range []bool{false, true} {
		got, err := plan(func(e *bundle.TargetEntry) bool { return hosts[e.Host] }, true, stream)
		if err != nil {
			t.Fatalf("stream %v: PlanTargets compiled the base again: %v", stream, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stream %v: plan with the committed changes:\n%+v\nwant\n%+v", stream, got, want)
		}
		// No host kept: the base lacks the targets and is compiled again.
		if _, err := plan(func(*bundle.TargetEntry) bool { return false }, true, stream); err == nil || !strings.Contains(err.Error(), "changed while it was compiled") {
			t.Fatalf("stream %v: a base holding none of the changed targets: %v, want it compiled again (and refused: its sources changed)", stream, err)
		}
		if got, err := plan(func(*bundle.TargetEntry) bool { return false }, false, stream); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("stream %v: plan compiling the base again: %v\n%+v\nwant\n%+v", stream, err, got, want)
		}
	}
}

func mustCompile(t *testing.T, dir string, opts compiler.Options) *compiler.Result {
	t.Helper()
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
