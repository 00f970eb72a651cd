package promoter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/fixtures"
	"github.com/configpub/configpub/promoter"
)

// compileFixture compiles the fixture policy repository for env after edit
// (path -> replace(old, new)) was applied to its files.
func compileFixture(t testing.TB, env string, edits map[string][2]string) *compiler.Result {
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
		if e, ok := edits[p]; ok {
			if !strings.Contains(string(b), e[0]) {
				t.Fatalf("%s does not contain %q", p, e[0])
			}
			b = []byte(strings.Replace(string(b), e[0], e[1], 1))
		}
		m[p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(context.Background(), m, compiler.Options{EnvTag: env, CreatedAt: t0})
	if err != nil {
		t.Fatalf("compile %s: %v", env, err)
	}
	return res
}

// withManifest is release(...) carrying res's manifest, with target 0 the
// Agent "account" and target 1 the Agent "tech-support".
func withManifest(in promoter.ReleaseInput, res *compiler.Result) promoter.ReleaseInput {
	in.ManifestBytes = res.ManifestBytes
	in.ReleaseDigest = res.Manifest.ReleaseDigest
	in.Targets[0].SubjectKind, in.Targets[0].SubjectName = "Agent", "account"
	in.Targets[1].SubjectKind, in.Targets[1].SubjectName = "Agent", "tech-support"
	return in
}

func (f *fixture) stage(t testing.TB, res *compiler.Result) {
	t.Helper()
	if err := f.store.StageWorkflowViews(context.Background(), res.ManifestBytes, promoter.WorkflowViewsOf(res.Workflows)); err != nil {
		t.Fatalf("stage: %v", err)
	}
}

// recordedViews dumps every workflow_release_view row with its view, as text.
func (f *fixture) recordedViews(t testing.TB) []string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT rv::text || ' ' || v::text
		FROM configpub.workflow_release_view rv JOIN configpub.workflow_view v USING (view_digest)
		ORDER BY rv.env_tag, rv.release_version, rv.wf_def_id, rv.version`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type recorded struct {
	key, publication, digest string
	accepted                 string
}

func (f *fixture) viewsOf(t testing.TB, env string, release int64) []recorded {
	t.Helper()
	return f.queryRecorded(t, `SELECT wf_def_id::text || '@' || version, publication_id::text,
			view_digest, accepted_publications::text
		FROM configpub.workflow_release_view WHERE env_tag = $1 AND release_version = $2 ORDER BY 1`, env, release)
}

// queryRecorded runs sql, which selects a view's key, publication, digest
// and accepted publications as text.
func (f *fixture) queryRecorded(t testing.TB, sql string, args ...any) []recorded {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (recorded, error) {
		var x recorded
		return x, r.Scan(&x.key, &x.publication, &x.digest, &x.accepted)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func publishedKeys(res *compiler.Result) (published, draft []string) {
	for _, w := range res.Manifest.Workflows {
		if w.State == "PUBLISHED" {
			published = append(published, w.WfDefID+"@"+w.Version)
		} else {
			draft = append(draft, w.WfDefID+"@"+w.Version)
		}
	}
	sort.Strings(published)
	return published, draft
}

func TestActivationRecordsOneViewPerPublishedVersionWithThePublication(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	res := compileFixture(t, "dev", nil)
	published, draft := publishedKeys(res)
	if len(published) < 2 || len(draft) == 0 {
		t.Fatalf("fixture: want >= 2 PUBLISHED and a DRAFT version, got %v and %v", published, draft)
	}
	in := withManifest(release("prod", 1, 0, 3, nil, nil), res)

	// Views for other content than the manifest's are refused.
	views := promoter.WorkflowViewsOf(res.Workflows)
	if err := f.store.StageWorkflowViews(ctx, res.ManifestBytes, views[:1]); err == nil {
		t.Fatal("staging without every PUBLISHED version succeeded")
	}
	bad := append([]promoter.WorkflowView(nil), views...)
	bad[0].State = "DRAFT"
	if err := f.store.StageWorkflowViews(ctx, res.ManifestBytes, bad); err == nil {
		t.Fatal("staging a DRAFT view succeeded")
	}
	bad = append([]promoter.WorkflowView(nil), views...)
	bad[0].Values = []byte(strings.Replace(string(bad[0].Values), "retries: 3", "retries: 30", 1))
	if err := f.store.StageWorkflowViews(ctx, res.ManifestBytes, bad); !errors.Is(err, promoter.ErrIntegrity) {
		t.Fatalf("staging an edited document: got %v, want ErrIntegrity", err)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.workflow_view_stage"); n != 0 {
		t.Fatalf("refused staging left %d rows", n)
	}

	f.stage(t, res)
	f.stage(t, res) // idempotent
	if n := f.count(t, "SELECT count(*) FROM configpub.workflow_release_view"); n != 0 {
		t.Fatalf("staging recorded %d views before activation", n)
	}
	f.promote(t, in)
	got := f.viewsOf(t, "prod", 1)
	var keys []string
	for _, r := range got {
		keys = append(keys, r.key)
		if r.publication != in.Targets[0].PublicationID {
			t.Errorf("view %s: publication %s, want the release's %s", r.key, r.publication, in.Targets[0].PublicationID)
		}
	}
	if strings.Join(keys, ",") != strings.Join(published, ",") {
		t.Fatalf("recorded %v, want exactly the PUBLISHED versions %v", keys, published)
	}
	for _, d := range draft {
		if n := f.count(t, "SELECT count(*) FROM configpub.workflow_release_view WHERE wf_def_id::text || '@' || version = $1", d); n != 0 {
			t.Errorf("DRAFT %s recorded", d)
		}
	}
	// account-onboarding allows the Agent "account": its accepted
	// publication is the release's account snapshot.
	for _, r := range got {
		if strings.HasPrefix(r.key, "3f0c9a52") && !strings.Contains(r.accepted, `"agent": "account"`) ||
			strings.HasPrefix(r.key, "3f0c9a52") && !strings.Contains(r.accepted, in.Targets[0].PublicationID) {
			t.Errorf("view %s: accepted publications %s lack account's", r.key, r.accepted)
		}
		if strings.Contains(r.accepted, "tech-support") && strings.HasPrefix(r.key, "3f0c9a52") {
			t.Errorf("view %s accepts tech-support, which it does not allow: %s", r.key, r.accepted)
		}
	}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.WorkflowViews) != len(published) {
		t.Fatalf("status lists %d workflow views, want %d", len(st.WorkflowViews), len(published))
	}
	for _, w := range st.WorkflowViews {
		if w.State != promoter.WorkflowViewPinnable || !w.Current || w.ReleaseVersion != 1 {
			t.Errorf("status view %s@%s: %+v, want current PINNABLE of release 1", w.Workflow, w.Version, w)
		}
	}
}

func TestRollbackAndForwardActivationDoNotEditViews(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	dev := compileFixture(t, "dev", nil)
	// Release 2 changes the view of account-onboarding@1.0.0 (the Agent it
	// allows has a new policy) without touching the version.
	dev2 := compileFixture(t, "dev", map[string][2]string{
		"agents/account.yaml": {"maxOutputTokens: 4096", "maxOutputTokens: 4000"},
	})
	r1 := withManifest(release("prod", 1, 0, 3, nil, nil), dev)
	r2 := withManifest(release("prod", 2, 1, 3, nil, nil), dev2)
	f.stage(t, dev)
	f.stage(t, dev2)
	f.promote(t, r1)
	f.promote(t, r2)
	v1, v2 := f.viewsOf(t, "prod", 1), f.viewsOf(t, "prod", 2)
	if len(v1) == 0 || len(v1) != len(v2) {
		t.Fatalf("release 1 has %d views, release 2 %d", len(v1), len(v2))
	}
	if v1[0].digest == v2[0].digest || v1[0].publication == v2[0].publication {
		t.Fatalf("release 2's view of %s did not change: %+v / %+v", v1[0].key, v1[0], v2[0])
	}
	before := f.recordedViews(t)
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb"), EnvTag: "prod", ToRelease: 1, Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if after := f.recordedViews(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("rollback changed recorded views:\nbefore %v\nafter  %v", before, after)
	}
	current := func() []string {
		rows, err := f.pool.Query(ctx, "SELECT view_digest FROM configpub_workflow.workflow_view_current WHERE env_tag = 'prod' ORDER BY wf_def_id")
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if c := current(); len(c) != len(v1) || c[0] != v1[0].digest {
		t.Fatalf("after rollback the current views are %v, want release 1's", c)
	}
	if _, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: moveID("fw"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if after := f.recordedViews(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("forward activation changed recorded views")
	}
	if c := current(); c[0] != v2[0].digest {
		t.Fatalf("after forward activation the current views are %v, want release 2's", c)
	}
	// The database refuses edits itself.
	for _, stmt := range []string{
		"UPDATE configpub.workflow_release_view SET publication_id = gen_random_uuid()",
		"DELETE FROM configpub.workflow_view_stage",
		"UPDATE configpub.workflow_view SET limits = '{}'",
	} {
		if _, err := f.pool.Exec(ctx, stmt); err == nil {
			t.Errorf("%s succeeded as the owner", stmt)
		}
	}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	cur := 0
	for _, w := range st.WorkflowViews {
		if w.Current != (w.ReleaseVersion == 2) {
			t.Errorf("status view %+v: current flag wrong", w)
		}
		if w.Current {
			cur++
		}
	}
	if cur != len(v2) {
		t.Errorf("status: %d current views, want %d", cur, len(v2))
	}
}

// TestRecordedViewsCarryNoForbiddenField plants an Agent prompt (the Agent
// the workflow allows), a provider credential reference (the Agent's
// model) and authoring metadata (the workflow's description) and searches
// every field of every recorded view, as the Workflow reader sees it.
func TestRecordedViewsCarryNoForbiddenField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	planted := []string{"PLANTED-PROMPT-5d1f", "PLANTED-CRED-77ab", "PLANTED-AUTHORING-c0de"}
	res := compileFixture(t, "dev", map[string][2]string{
		"agents/account.yaml":               {"You are the account assistant", planted[0] + " You are the account assistant"},
		"models/chat-default.yaml":          {"vault://secret/llm/openai#apiKey", "vault://secret/llm/" + planted[1] + "#apiKey"},
		"workflows/account-onboarding.yaml": {"  name: account-onboarding\n", "  name: account-onboarding\n  description: " + planted[2] + "\n"},
	})
	// The planted values did reach the compiled release (else the test
	// proves nothing).
	var agentValues string
	for _, tg := range res.Targets {
		agentValues += string(tg.Values)
	}
	if !strings.Contains(agentValues, planted[0]) {
		t.Fatalf("the planted prompt is not in any compiled artifact")
	}
	f.stage(t, res)
	f.promote(t, withManifest(release("prod", 1, 0, 3, nil, nil), res))

	reader := f.db.PoolURL(t, f.db.URLFor(t, "configpub_workflow_reader"))
	rows, err := reader.Query(ctx, "SELECT * FROM configpub_workflow.workflow_view_history")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n, fields := 0, 0
	for rows.Next() {
		n++
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			fields++
			s := strings.ToLower(toText(v))
			for _, p := range planted {
				if strings.Contains(s, strings.ToLower(p)) {
					t.Errorf("view field %s contains %s", rows.FieldDescriptions()[i].Name, p)
				}
			}
			for _, word := range []string{"prompt", "vault://", "credentialref", "description"} {
				if strings.Contains(s, word) {
					t.Errorf("view field %s contains %q", rows.FieldDescriptions()[i].Name, word)
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 || fields < 20*n {
		t.Fatalf("read %d views with %d fields", n, fields)
	}
}

func toText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return x.String()
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// TestPromoterRoleStagesAndRecordsViews: configpub_promoter's grants
// suffice to stage, record and list workflow views.
func TestPromoterRoleStagesAndRecordsViews(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	pool := f.db.PoolURL(t, f.db.URLFor(t, "configpub_promoter"))
	s, err := promoter.Open(ctx, pool, promoter.Options{Signer: f.key})
	if err != nil {
		t.Fatal(err)
	}
	res := compileFixture(t, "dev", nil)
	if err := s.StageWorkflowViews(ctx, res.ManifestBytes, promoter.WorkflowViewsOf(res.Workflows)); err != nil {
		t.Fatalf("stage as configpub_promoter: %v", err)
	}
	if _, err := s.RecordAndActivate(ctx, withManifest(release("prod", 1, 0, 3, nil, nil), res)); err != nil {
		t.Fatalf("promote as configpub_promoter: %v", err)
	}
	vs, err := s.WorkflowViews(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if published, _ := publishedKeys(res); len(vs) != len(published) {
		t.Fatalf("configpub_promoter sees %d views, want %d", len(vs), len(published))
	}
}

// TestViewsOfAReleaseThatCreatesNoSnapshot: release 2 keeps every snapshot
// of release 1 (only a DRAFT workflow version changed); its views carry release 2's own
// publicationId, not release 1's.
func TestViewsOfAReleaseThatCreatesNoSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	dev := compileFixture(t, "dev", nil)
	dev2 := compileFixture(t, "dev", map[string][2]string{
		"workflows/account-onboarding.yaml": {"timeout: 45m", "timeout: 40m"}, // the DRAFT
	})
	f.stage(t, dev)
	f.stage(t, dev2)
	r1 := withManifest(release("prod", 1, 0, 3, nil, nil), dev)
	r2 := withManifest(release("prod", 2, 1, 3, func(int) bool { return false }, func(int) int64 { return 1 }), dev2)
	f.promote(t, r1)
	f.promote(t, r2)
	got := f.viewsOf(t, "prod", 2)
	if len(got) == 0 {
		t.Fatal("release 2 recorded no views")
	}
	want := bundle.PublicationID("prod", 2)
	for _, r := range got {
		if r.publication != want {
			t.Errorf("view %s of release 2: publication %s, want %s (release 1's is %s)", r.key, r.publication, want, r1.Targets[0].PublicationID)
		}
	}
}

// legacyRecordedViews is the statement that recorded Workflow views before
// they were recorded with one read of the release's targets (it read them
// once per view), as a SELECT: the reference the recorded rows must equal
// byte for byte.
const legacyRecordedViews = `SELECT st.wf_def_id::text || '@' || st.version, pub.publication_id::text, st.view_digest,
		(SELECT coalesce(jsonb_agg(jsonb_build_object('agent', s.subject_name, 'host', s.host,
				'serviceId', s.service_id, 'publicationId', s.publication_id::text, 'policyDigest', s.policy_digest)
				ORDER BY s.subject_name, s.host, s.service_id), '[]'::jsonb)
			FROM configpub.config_release_target rt
			JOIN configpub.config_snapshot s ON s.snapshot_id = rt.snapshot_id
			WHERE rt.env_tag = r.env_tag AND rt.release_version = r.release_version AND s.audience = 'agent'
			  AND s.subject_name IN (SELECT a->>'name' FROM jsonb_array_elements(v.agents) a))::text
	FROM configpub.config_release r
	JOIN configpub.workflow_view_stage st ON st.definition_hash = r.definition_hash
	JOIN configpub.workflow_view v ON v.view_digest = st.view_digest
	CROSS JOIN LATERAL (SELECT coalesce((SELECT s.publication_id
		FROM configpub.config_release_target rt
		JOIN configpub.config_snapshot s ON s.snapshot_id = rt.snapshot_id
		WHERE rt.env_tag = r.env_tag AND rt.release_version = r.release_version
		  AND s.release_version = r.release_version
		ORDER BY s.publication_id LIMIT 1), $3::text::uuid) AS publication_id) pub
	WHERE r.env_tag = $1 AND r.release_version = $2
	ORDER BY 1`

// TestRecordedViewsEqualTheReadPerView stages hand-made views on releases
// whose Agents share names across hosts, keep snapshots of an earlier
// release, or create none, and checks that every recorded view equals what
// the statement reading the targets once per view recorded: the same
// publication and the same accepted publications, byte for byte.
func TestRecordedViewsEqualTheReadPerView(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	// Targets: "account" at hosts 0, 2 and 5 (5 is a Gateway of that name,
	// not an Agent), "tech-support" at 1 and 4, "billing" at 3.
	names := []struct{ audience, kind, name string }{
		{"agent", "Agent", "account"}, {"agent", "Agent", "tech-support"}, {"agent", "Agent", "account"},
		{"agent", "Agent", "billing"}, {"agent", "Agent", "tech-support"}, {"gateway", "Gateway", "account"},
	}
	named := func(in promoter.ReleaseInput) promoter.ReleaseInput {
		for i, n := range names {
			in.Targets[i].Audience, in.Targets[i].SubjectKind, in.Targets[i].SubjectName = n.audience, n.kind, n.name
		}
		return in
	}
	// Views allow: a duplicate name and one no target has; nothing; two
	// names in reverse order; a name only a Gateway has.
	allows := [][]string{{"account", "account", "nobody"}, {}, {"tech-support", "billing"}, {"billing"}, {"nobody"}}
	stageViews := func(in promoter.ReleaseInput) { f.stageHandMade(t, digest(in.ManifestBytes), allows) }
	r1 := named(release("prod", 1, 0, 6, nil, nil))
	// Release 2 keeps the snapshots of targets 0 and 1 from release 1.
	r2 := named(release("prod", 2, 1, 6, func(i int) bool { return i > 1 }, func(int) int64 { return 1 }))
	// Release 3 creates no snapshot: its views carry its derived publicationId.
	r3 := named(release("prod", 3, 2, 6, func(int) bool { return false }, func(i int) int64 { return 1 + int64(i%2) }))
	for _, in := range []promoter.ReleaseInput{r1, r2, r3} {
		stageViews(in)
		f.promote(t, in)
		want := f.queryRecorded(t, legacyRecordedViews, "prod", in.ReleaseVersion, bundle.PublicationID("prod", in.ReleaseVersion))
		got := f.viewsOf(t, "prod", in.ReleaseVersion)
		if len(want) != len(allows) || len(got) != len(want) {
			t.Fatalf("release %d: recorded %d views, the reference %d, staged %d", in.ReleaseVersion, len(got), len(want), len(allows))
		}
		accepting := 0
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("release %d, view %s:\n got  %+v\n want %+v", in.ReleaseVersion, want[i].key, got[i], want[i])
			}
			if want[i].accepted != "[]" {
				accepting++
			}
		}
		if accepting != 3 {
			t.Errorf("release %d: %d views accept an Agent, want 3 (the test proves less)", in.ReleaseVersion, accepting)
		}
	}
	// A rollback records nothing and changes nothing.
	before := f.recordedViews(t)
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("rb"), EnvTag: "prod", ToRelease: 1, Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if after := f.recordedViews(t); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("rollback changed recorded views")
	}
}

// stageHandMade stores and stages, for the release whose definition hash
// is hash, one view per entry of allows, allowing the Agents it names,
// straight into the tables (StageWorkflowViews wants a compiled release
// with its workflows; the recording reads only these rows). View i is the
// same row for every release.
func (f *fixture) stageHandMade(t testing.TB, hash string, allows [][]string) {
	t.Helper()
	ctx := context.Background()
	batch := &pgx.Batch{}
	for i, a := range allows {
		agents := []map[string]string{}
		for _, n := range a {
			agents = append(agents, map[string]string{"name": n})
		}
		js, err := json.Marshal(agents)
		if err != nil {
			t.Fatal(err)
		}
		doc := []byte(fmt.Sprintf("workflowPolicy:\n  workflow: wf-%d\n", i))
		vd := digest([]byte(fmt.Sprint("view ", i, " ", string(js))))
		batch.Queue(`INSERT INTO configpub.workflow_view (view_digest, wf_def_id, version, workflow,
				state, definition_digest, compatibility_generation, limits, approvals, agents, tools, runner, retention,
				endpoint_targets, document, document_digest)
			VALUES ($1, $2::text::uuid, '1.0.0', $3, 'PUBLISHED', $4, 1, '{}', '{}', $5::text::jsonb, '[]', '{}', '{}',
				'[]', $6, $7) ON CONFLICT DO NOTHING`,
			vd, id("wf", i), fmt.Sprintf("wf-%d", i), digest([]byte(fmt.Sprint("def", i))), string(js), doc, digest(doc))
		batch.Queue(`INSERT INTO configpub.workflow_view_stage (definition_hash, wf_def_id, version, view_digest)
			VALUES ($1, $2::text::uuid, '1.0.0', $3)`, hash, id("wf", i), vd)
	}
	if err := f.pool.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatalf("stage hand-made views: %v", err)
	}
}
