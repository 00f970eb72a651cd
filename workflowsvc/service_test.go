package workflowsvc_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/fixtures"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/workflowsvc"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const (
	onboarding = "3f0c9a52-7d1e-4b8a-9c61-2f5e8d4b7a10" // account-onboarding in the fixture
	binding    = "open-account"
)

// compile compiles the fixture policy repository's dev environment as a
// first release (no committed manifest), after replacing old by new in
// workflows/account-onboarding.yaml.
func compile(t *testing.T, old, new string) *compiler.Result {
	t.Helper()
	src, err := fixtures.PolicyRepo()
	if err != nil {
		t.Fatal(err)
	}
	m := fstest.MapFS{}
	err = fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(p, compiler.ReleasesDir+"/") {
			return err
		}
		b, err := fs.ReadFile(src, p)
		if p == "workflows/account-onboarding.yaml" {
			if !strings.Contains(string(b), old) {
				t.Fatalf("%s lacks %q", p, old)
			}
			b = []byte(strings.Replace(string(b), old, new, 1))
		}
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(context.Background(), m, compiler.Options{EnvTag: "dev", CreatedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func id(parts ...any) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(parts...))).String()
}

// releaseInput is release `version` of "dev" with res's manifest and one
// Agent target ("account") created by the release, publication pub.
func releaseInput(version int64, res *compiler.Result, pub string) promoter.ReleaseInput {
	values := []byte(fmt.Sprintf("runtimePolicy:\n  releaseVersion: %d\nagentPolicy: {}\n", version))
	return promoter.ReleaseInput{
		CommandID: id("cmd", version), EnvTag: "dev", ReleaseVersion: version, BaseReleaseVersion: version - 1,
		ManifestBytes: res.ManifestBytes, ReleaseDigest: res.Manifest.ReleaseDigest, Actor: "a", Reason: "r",
		Targets: []promoter.Target{{
			Host: "dev.lightapi.net", ServiceID: "com.networknt.agent-account-1.0.0", EnvTag: "dev", Audience: "agent",
			SubjectKind: "Agent", SubjectName: "account",
			SnapshotID: id("snap", version), PublicationID: pub, PolicySnapshotID: id("pol", version),
			ReleaseVersion: version, PolicyVersion: version,
			PolicyDigest: digest([]byte(fmt.Sprint("p", version))), ContentDigest: digest([]byte(fmt.Sprint("c", version))),
			PropertySetDigest: digest([]byte("ps")), ArtifactDigest: digest(values),
			CreatedAt: t0, ValidFrom: t0, ExpiresAt: t0.Add(21 * 24 * time.Hour), Changed: true, LeaseProfile: "standard",
			Lease:  promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute},
			Values: values,
		}},
	}
}

type env struct {
	db    *pgtest.DB
	store *promoter.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := workflowsvc.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := workflowsvc.Migrate(ctx, conn); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	store, err := promoter.Open(ctx, db.Pool(t), promoter.Options{Signer: key, Clock: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return &env{db: db, store: store}
}

func (e *env) promote(t *testing.T, in promoter.ReleaseInput, res *compiler.Result) {
	t.Helper()
	ctx := context.Background()
	if err := e.store.StageWorkflowViews(ctx, res.ManifestBytes, promoter.WorkflowViewsOf(res.Workflows)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RecordAndActivate(ctx, in); err != nil {
		t.Fatal(err)
	}
}

func (e *env) service(t *testing.T, policy workflowsvc.RevokedPolicy) *workflowsvc.Service {
	t.Helper()
	s, err := workflowsvc.Open(e.db.PoolURL(t, e.db.URLFor(t, "configpub_workflow_service")),
		workflowsvc.Options{OnRevoked: policy, Clock: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func admit(t *testing.T, s *workflowsvc.Service, inv string) *workflowsvc.Invocation {
	t.Helper()
	got, err := s.Admit(context.Background(), workflowsvc.AdmitRequest{InvocationID: id("inv", inv), EnvTag: "dev",
		WfDefID: onboarding, Version: "1.0.0", Binding: binding})
	if err != nil {
		t.Fatalf("admit %s: %v", inv, err)
	}
	return got
}

const (
	oldNotify = "com.networknt.notification-1.0.0"
	newNotify = "com.networknt.notification-2.0.0"
)

// TestAdmissionPinsTheEndpointTargetSet admits under release 1, activates
// release 2 whose view of the same (wfDefId, version) has another endpoint
// target set, and checks that admitted work keeps release 1's set, new work
// gets release 2's, a rollback changes neither, and revoking release 2's
// publication refuses new admissions under it.
func TestAdmissionPinsTheEndpointTargetSet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	res1 := compile(t, "", "")
	res2 := compile(t, oldNotify, newNotify)
	pub1, pub2 := id("pub", 1), id("pub", 2)
	svc := e.service(t, workflowsvc.RevokedDeny)
	drain := e.service(t, workflowsvc.RevokedDrain)

	if _, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "early"), EnvTag: "dev",
		WfDefID: onboarding, Version: "1.0.0", Binding: binding}); !errors.Is(err, workflowsvc.ErrNoView) {
		t.Fatalf("admit before any release: got %v, want ErrNoView", err)
	}
	e.promote(t, releaseInput(1, res1, pub1), res1)
	a := admit(t, svc, "a")
	if a.ReleaseVersion != 1 || a.PublicationID != pub1 || !slices.Contains(a.EndpointTargets, oldNotify) {
		t.Fatalf("invocation a: %+v, want release 1, publication %s, %s pinned", a, pub1, oldNotify)
	}
	// DRAFT 1.1.0 has no view; a binding the view does not name is refused.
	for _, req := range []workflowsvc.AdmitRequest{
		{InvocationID: id("inv", "draft"), EnvTag: "dev", WfDefID: onboarding, Version: "1.1.0", Binding: binding},
		{InvocationID: id("inv", "tool"), EnvTag: "dev", WfDefID: onboarding, Version: "1.0.0", Binding: "reset-device"},
	} {
		if _, err := svc.Admit(ctx, req); !errors.Is(err, workflowsvc.ErrNoView) && !errors.Is(err, workflowsvc.ErrBinding) {
			t.Errorf("admit %s@%s via %s: got %v, want refused", req.WfDefID, req.Version, req.Binding, err)
		}
	}

	e.promote(t, releaseInput(2, res2, pub2), res2)
	b := admit(t, svc, "b")
	if b.ReleaseVersion != 2 || b.PublicationID != pub2 || !slices.Contains(b.EndpointTargets, newNotify) || slices.Contains(b.EndpointTargets, oldNotify) {
		t.Fatalf("invocation b: %+v, want release 2's set with %s", b, newNotify)
	}
	if a.ViewDigest == b.ViewDigest {
		t.Fatal("releases 1 and 2 recorded the same view")
	}
	// a dispatches from its own copy only.
	if _, err := svc.Dispatch(ctx, a.InvocationID, oldNotify+"/send"); err != nil {
		t.Fatalf("a dispatching to its pinned %s: %v", oldNotify, err)
	}
	if _, err := svc.Dispatch(ctx, a.InvocationID, newNotify+"/send"); !errors.Is(err, workflowsvc.ErrNotPinned) {
		t.Fatalf("a dispatching to release 2's %s: got %v, want ErrNotPinned", newNotify, err)
	}
	if _, err := svc.Dispatch(ctx, b.InvocationID, oldNotify+"/send"); !errors.Is(err, workflowsvc.ErrNotPinned) {
		t.Fatalf("b dispatching to release 1's %s: got %v, want ErrNotPinned", oldNotify, err)
	}
	if _, err := svc.Dispatch(ctx, b.InvocationID, newNotify+"/send"); err != nil {
		t.Fatal(err)
	}
	// Re-admitting a replays it unchanged, under release 2.
	if again := admit(t, svc, "a"); again.ViewDigest != a.ViewDigest || again.ReleaseVersion != 1 {
		t.Fatalf("re-admitting a moved it: %+v", again)
	}

	// Revoke release 2's publication: new admissions are refused, admitted
	// work follows the policy, release 1's work is unaffected.
	if _, err := e.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke"), PublicationID: pub2, Reason: "bad", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "c"), EnvTag: "dev",
		WfDefID: onboarding, Version: "1.0.0", Binding: binding}); !errors.Is(err, workflowsvc.ErrRevoked) {
		t.Fatalf("admit under a revoked publication: got %v, want ErrRevoked", err)
	}
	if _, err := svc.Dispatch(ctx, b.InvocationID, newNotify+"/send"); !errors.Is(err, workflowsvc.ErrRevoked) {
		t.Fatalf("deny policy, b dispatching after revocation: got %v, want ErrRevoked", err)
	}
	if _, err := drain.Dispatch(ctx, b.InvocationID, newNotify+"/send"); err != nil {
		t.Fatalf("drain policy, b dispatching after revocation: %v", err)
	}
	if _, err := svc.Dispatch(ctx, a.InvocationID, oldNotify+"/send"); err != nil {
		t.Fatalf("a (release 1) after release 2's revocation: %v", err)
	}

	// Roll back to release 1: new work gets release 1's set again; admitted
	// work is unchanged.
	if _, err := e.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("rb"), EnvTag: "dev", ToRelease: 1, Actor: "a", Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	d := admit(t, svc, "d")
	if d.ReleaseVersion != 1 || !slices.Contains(d.EndpointTargets, oldNotify) {
		t.Fatalf("after rollback, d: %+v", d)
	}
	for _, want := range []*workflowsvc.Invocation{a, b} {
		got, err := svc.Invocation(ctx, want.InvocationID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ViewDigest != want.ViewDigest || strings.Join(got.EndpointTargets, ",") != strings.Join(want.EndpointTargets, ",") {
			t.Errorf("invocation %s changed: %+v, was %+v", want.InvocationID, got, want)
		}
	}
}

func TestOpenRequiresAnExplicitRevocationPolicy(t *testing.T) {
	if _, err := workflowsvc.Open(nil, workflowsvc.Options{}); err == nil {
		t.Fatal("Open without OnRevoked succeeded")
	}
}

// TestServiceRoleWritesOnlyItsOwnTables runs each statement kind as
// configpub_workflow_service.
func TestServiceRoleWritesOnlyItsOwnTables(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	res := compile(t, "", "")
	e.promote(t, releaseInput(1, res, id("pub", 1)), res)
	svc := e.service(t, workflowsvc.RevokedDeny)
	a := admit(t, svc, "a")
	pool := e.db.PoolURL(t, e.db.URLFor(t, "configpub_workflow_service"))
	for _, stmt := range []string{
		"SELECT count(*) FROM configpub_workflow.workflow_view_history",
		"SELECT count(*) FROM workflowsvc.invocation",
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Errorf("%s: %v", stmt, err)
		}
	}
	refused := []string{
		"UPDATE workflowsvc.invocation SET binding = 'x'",
		"DELETE FROM workflowsvc.invocation_endpoint_target",
		"UPDATE workflowsvc.invocation_endpoint_target SET service_id = 'x'",
		"TRUNCATE workflowsvc.dispatch",
		"SELECT * FROM configpub.config_snapshot",
		"SELECT * FROM configpub.workflow_view",
		"SELECT * FROM configpub.artifact",
		"INSERT INTO configpub.workflow_release_view (env_tag) VALUES ('x')",
		"UPDATE configpub.environment SET current_release_version = 1",
		"CREATE TABLE workflowsvc.x (a int)",
	}
	for _, stmt := range refused {
		if _, err := pool.Exec(ctx, stmt); err == nil {
			t.Errorf("%s succeeded as configpub_workflow_service", stmt)
		}
	}
	// The owner cannot edit admitted work either.
	if _, err := e.db.Pool(t).Exec(ctx, "UPDATE workflowsvc.invocation_endpoint_target SET service_id = 'x' WHERE invocation_id = $1::text::uuid", a.InvocationID); err == nil {
		t.Error("owner edited a pinned endpoint target")
	}
}

// serviceGrants is the complete inventory of configpub_workflow_service:
// the reader's views (through membership) and its own tables.
var serviceGrants = []string{
	"configpub_workflow.revoked_snapshot SELECT",
	"configpub_workflow.workflow_view_current SELECT",
	"configpub_workflow.workflow_view_history SELECT",
	"member of configpub_workflow_reader",
	"schema configpub_workflow USAGE",
	"schema workflowsvc USAGE",
	"workflowsvc.dispatch INSERT",
	"workflowsvc.dispatch SELECT",
	"workflowsvc.dispatch_dispatch_id_seq USAGE",
	"workflowsvc.invocation INSERT",
	"workflowsvc.invocation SELECT",
	"workflowsvc.invocation_endpoint_target INSERT",
	"workflowsvc.invocation_endpoint_target SELECT",
}

func TestServiceRoleGrantInventory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	got, err := pgtest.Grants(context.Background(), e.db.Pool(t), "configpub_workflow_service")
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(serviceGrants)
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("configpub_workflow_service grants:\n  %s\nwant exactly:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestAdmissionChecksTheCallingAgent: an admission that names its calling
// Agent (AdmitRequest.Caller, from the Agent runtime's token and its
// publication headers) is refused when the view does not allow an Agent at
// that identity, when the Agent runs another publication than the current
// release maps it to, and when the Agent's own publication is revoked —
// though the view's is not. Before, admission named no Agent and admitted
// work for any. A request without a caller is admitted as before, and the
// caller is recorded with the invocation (a replay must name the same).
func TestAdmissionChecksTheCallingAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	res1 := compile(t, "", "")
	res2 := compile(t, oldNotify, newNotify)
	pub1 := id("pub", 1)
	in1 := releaseInput(1, res1, pub1)
	e.promote(t, in1, res1)
	svc := e.service(t, workflowsvc.RevokedDeny)
	agent := in1.Targets[0] // "account", which account-onboarding allows
	caller := workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: pub1, PolicyDigest: agent.PolicyDigest}
	req := func(inv string, c *workflowsvc.Caller) workflowsvc.AdmitRequest {
		return workflowsvc.AdmitRequest{InvocationID: id("inv", inv), EnvTag: "dev", WfDefID: onboarding, Version: "1.0.0",
			Binding: binding, Caller: c}
	}
	a, err := svc.Admit(ctx, req("a", &caller))
	if err != nil || a.Caller == nil || *a.Caller != caller {
		t.Fatalf("admit for the current account Agent: %+v, %v", a, err)
	}
	if got, err := svc.Invocation(ctx, a.InvocationID); err != nil || got.Caller == nil || *got.Caller != caller {
		t.Fatalf("invocation a read back: %+v, %v; want its caller recorded", got, err)
	}
	if again, err := svc.Admit(ctx, req("a", &caller)); err != nil || again.AdmittedAt != a.AdmittedAt {
		t.Fatalf("replay of a: %+v, %v", again, err)
	}
	if _, err := svc.Admit(ctx, req("a", nil)); !errors.Is(err, workflowsvc.ErrConflict) {
		t.Fatalf("replay of a without its caller: %v, want ErrConflict", err)
	}
	if b, err := svc.Admit(ctx, req("b", nil)); err != nil || b.Caller != nil {
		t.Fatalf("admit without a caller: %+v, %v; want admitted as before", b, err)
	}
	for name, c := range map[string]struct {
		caller workflowsvc.Caller
		want   error
	}{
		"an identity no allowed Agent runs at": {workflowsvc.Caller{Host: agent.Host, ServiceID: "com.networknt.agent-billing-1.0.0",
			PublicationID: pub1, PolicyDigest: agent.PolicyDigest}, workflowsvc.ErrCallerNotAllowed},
		"an older publication": {workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: id("pub", 0),
			PolicyDigest: digest([]byte("p0"))}, workflowsvc.ErrCallerNotCurrent},
		"another policy digest": {workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: pub1,
			PolicyDigest: digest([]byte("forged"))}, workflowsvc.ErrCallerNotCurrent},
	} {
		if _, err := svc.Admit(ctx, req(name, &c.caller)); !errors.Is(err, c.want) {
			t.Errorf("admit for %s: %v, want %v", name, err, c.want)
		}
	}
	bad := caller
	bad.PolicyDigest = "sha256:ABC"
	if _, err := svc.Admit(ctx, req("bad", &bad)); err == nil || !strings.Contains(err.Error(), "caller policyDigest") {
		t.Errorf("admit with a malformed caller digest: %v, want an error naming it", err)
	}

	// Release 2 carries the Agent over (no snapshot): its view is under
	// release 2's derived publication, the Agent still runs pub1.
	// Revoking pub1 leaves release 2's view pinnable: work without a
	// caller is admitted, the Agent of pub1 is not.
	in2 := releaseInput(2, res2, pub1)
	in2.Targets = releaseInput(1, res1, pub1).Targets
	in2.Targets[0].Changed = false
	e.promote(t, in2, res2)
	if _, err := e.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke", 1), PublicationID: pub1, Reason: "leaked prompt", Actor: "sec"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Admit(ctx, req("c", nil)); err != nil {
		t.Fatalf("admit without a caller under release 2 (its view's publication is not revoked): %v", err)
	}
	if _, err := svc.Admit(ctx, req("d", &caller)); !errors.Is(err, workflowsvc.ErrCallerRevoked) {
		t.Fatalf("admit for the Agent whose publication is revoked: %v, want ErrCallerRevoked", err)
	}
}
