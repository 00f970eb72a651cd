package workflowsvc_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/workflowsvc"
)

// TestRevokingAReleaseThatCreatedOnlyWorkflowViews: a release that changes
// no target (a workflow version re-added, say) creates no snapshot; its
// Workflow views are recorded under the publicationId the compiler derives
// for it, which status lists. Revoking that publication was refused ("no
// such snapshot or publication"), so work kept being admitted under a
// release the operator meant to stop. It is now recorded: admissions under
// it are refused, admitted work follows the policy, and the snapshots the
// release carries over are untouched (it can still be activated).
func TestRevokingAReleaseThatCreatedOnlyWorkflowViews(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	res1 := compile(t, "", "")
	res2 := compile(t, oldNotify, newNotify)
	pub1 := id("pub", 1)
	e.promote(t, releaseInput(1, res1, pub1), res1)
	// Release 2 carries release 1's only target over: it creates no snapshot.
	in2 := releaseInput(2, res2, pub1)
	in2.Targets = releaseInput(1, res1, pub1).Targets
	in2.Targets[0].Changed = false
	e.promote(t, in2, res2)
	svc := e.service(t, workflowsvc.RevokedDeny)
	b := admit(t, svc, "b")
	pub2 := bundle.PublicationID("dev", 2)
	if b.ReleaseVersion != 2 || b.PublicationID != pub2 {
		t.Fatalf("b: release %d publication %s, want release 2 under its derived publication %s", b.ReleaseVersion, b.PublicationID, pub2)
	}
	rev, err := e.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke", 2), PublicationID: pub2, Reason: "bad workflow", Actor: "a"})
	if err != nil {
		t.Fatalf("revoking the publication of release 2's Workflow views: %v", err)
	}
	if rev.CurrentCount != 0 {
		t.Fatalf("the revocation names %d current pointers, want none: %+v", rev.CurrentCount, rev)
	}
	// It says it covers Workflow views only: no runtime loses anything.
	if rev.Covers != promoter.RevokedViews || rev.Snapshots != 0 || rev.WorkflowViews == 0 {
		t.Fatalf("the revocation covers %q (%d snapshots, %d Workflow views), want %q: views only", rev.Covers, rev.Snapshots,
			rev.WorkflowViews, promoter.RevokedViews)
	}
	if _, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "c"), EnvTag: "dev",
		WfDefID: onboarding, Version: "1.0.0", Binding: binding}); !errors.Is(err, workflowsvc.ErrRevoked) {
		t.Fatalf("admit after the revocation: %v, want ErrRevoked", err)
	}
	if _, err := svc.Dispatch(ctx, b.InvocationID, newNotify+"/send"); !errors.Is(err, workflowsvc.ErrRevoked) {
		t.Fatalf("dispatch under deny after the revocation: %v, want ErrRevoked", err)
	}
	// history --revocations (the promoter) and the console (the viewer)
	// list it under release 2: they found a publication's environment
	// only through its snapshots, and left it out.
	recs, err := e.store.Revocations(ctx, "dev", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].PublicationID != pub2 || recs[0].ReleaseVersion != 2 || recs[0].Snapshots != 0 || recs[0].Current != 0 {
		t.Fatalf("revocations of dev: %+v, want release 2's publication %s covering no snapshot", recs, pub2)
	}
	for role, q := range map[string]string{"configpub_promoter": dbschema.RevocationsSQL, "configpub_viewer": dbschema.ViewerRevocationsSQL} {
		var n int
		var pub string
		var release int64
		if err := e.db.PoolURL(t, e.db.URLFor(t, role)).QueryRow(ctx, "SELECT count(*) OVER (), r.pub, r.rel FROM ("+
			"SELECT * FROM ("+q+") AS x(id, snap, pub, reason, actor, at, cmd, host, svc, rel, snaps, cur)) r",
			"dev", nil).Scan(&n, &pub, &release); err != nil {
			t.Fatalf("revocations as %s: %v", role, err)
		}
		if n != 1 || pub != pub2 || release != 2 {
			t.Fatalf("revocations as %s: %d rows, first %s of release %d, want release 2's publication", role, n, pub, release)
		}
	}
	// The target release 2 carries over is not revoked: release 1 is.
	if _, err := e.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("rb", 1), EnvTag: "dev", ToRelease: 1, Actor: "a", Reason: "r"}); err != nil {
		t.Fatalf("rollback to release 1 after revoking release 2's views: %v", err)
	}
	// A publication nothing carries is still refused.
	if _, err := e.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke", 9), PublicationID: bundle.PublicationID("dev", 9), Reason: "x", Actor: "a"}); !errors.Is(err, promoter.ErrNotFound) {
		t.Fatalf("revoking an unknown publication: %v, want ErrNotFound", err)
	}
}

// TestAdmissionRefusesACallerWhoseSnapshotIsRevoked: admission checked a
// calling Agent's revocation only through the recorded Workflow views of
// its publication, so an Agent whose own snapshot was revoked (`revoke
// --snapshot`), or whose publication no view was recorded under (a release
// recorded without activation, carried over by the next), was admitted.
// The Workflow reader now sees revoked snapshots
// (configpub_workflow.revoked_snapshot): both Agents are refused
// (ErrCallerRevoked, naming the snapshot and how it was revoked), while
// work that names no caller is still admitted under the view, whose
// publication is not revoked.
func TestAdmissionRefusesACallerWhoseSnapshotIsRevoked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	res1 := compile(t, "", "")
	res2 := compile(t, oldNotify, newNotify)
	pub1 := id("pub", 1)
	req := func(inv string, c *workflowsvc.Caller) workflowsvc.AdmitRequest {
		return workflowsvc.AdmitRequest{InvocationID: id("inv", inv), EnvTag: "dev", WfDefID: onboarding, Version: "1.0.0",
			Binding: binding, Caller: c}
	}
	for _, tc := range []struct {
		name string
		// setup records the releases and revokes; it returns the Agent's
		// caller and what the refusal must say.
		setup func(t *testing.T, e *env) (workflowsvc.Caller, string)
	}{
		{"revoke --snapshot", func(t *testing.T, e *env) (workflowsvc.Caller, string) {
			in1 := releaseInput(1, res1, pub1)
			e.promote(t, in1, res1)
			agent := in1.Targets[0]
			c := workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: pub1, PolicyDigest: agent.PolicyDigest}
			if _, err := e.service(t, workflowsvc.RevokedDeny).Admit(ctx, req("before", &c)); err != nil {
				t.Fatalf("admit before the revocation: %v", err)
			}
			if _, err := e.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke", "snap"), SnapshotID: agent.SnapshotID,
				Reason: "leaked key in the agent's config", Actor: "sec"}); err != nil {
				t.Fatal(err)
			}
			return c, "its snapshot " + agent.SnapshotID + " is revoked (by snapshot)"
		}},
		{"revoke --publication with no view under it", func(t *testing.T, e *env) (workflowsvc.Caller, string) {
			// Release 1 is recorded, never activated: no view is recorded
			// under pub1. Release 2 carries its Agent over.
			in1 := releaseInput(1, res1, pub1)
			if _, err := e.store.Record(ctx, in1); err != nil {
				t.Fatal(err)
			}
			in2 := releaseInput(2, res2, pub1)
			in2.Targets = releaseInput(1, res1, pub1).Targets
			in2.Targets[0].Changed = false
			e.promote(t, in2, res2)
			agent := in1.Targets[0]
			var views int
			if err := e.db.Pool(t).QueryRow(ctx, `SELECT count(*) FROM configpub_workflow.workflow_view_history
				WHERE publication_id = $1::text::uuid`, pub1).Scan(&views); err != nil || views != 0 {
				t.Fatalf("views recorded under %s: %d, %v; want none", pub1, views, err)
			}
			if _, err := e.store.Revoke(ctx, promoter.RevokeInput{CommandID: id("revoke", "pub"), PublicationID: pub1,
				Reason: "bad agent policy", Actor: "sec"}); err != nil {
				t.Fatal(err)
			}
			return workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: pub1, PolicyDigest: agent.PolicyDigest},
				"its snapshot " + agent.SnapshotID + " is revoked (by publication)"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c, want := tc.setup(t, e)
			svc := e.service(t, workflowsvc.RevokedDeny)
			_, err := svc.Admit(ctx, req("after", &c))
			if !errors.Is(err, workflowsvc.ErrCallerRevoked) || !strings.Contains(err.Error(), want) {
				t.Fatalf("admit for the Agent after the revocation: %v, want ErrCallerRevoked saying %q", err, want)
			}
			if _, err := svc.Invocation(ctx, id("inv", "after")); !errors.Is(err, workflowsvc.ErrNotFound) {
				t.Fatalf("the refused admission was recorded: %v", err)
			}
			if _, err := svc.Admit(ctx, req("no caller", nil)); err != nil {
				t.Fatalf("admit without a caller (the view's publication is not revoked): %v", err)
			}
		})
	}
}

// TestCallerCheckFailsClosedOnADatabaseBeforeMigration30: on a configpub
// database whose migrations stop before 30 the Workflow reader has no
// configpub_workflow.revoked_snapshot; an admission that names its caller
// is refused, saying to migrate, rather than admitting an Agent whose
// revocation it cannot see. (The view is dropped by the owner after the
// releases are recorded: the promoter refuses to record on a database
// behind its binary.)
func TestCallerCheckFailsClosedOnADatabaseBeforeMigration30(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	res1 := compile(t, "", "")
	pub1 := id("pub", 1)
	in1 := releaseInput(1, res1, pub1)
	e.promote(t, in1, res1)
	if _, err := e.db.Pool(t).Exec(ctx, `DROP VIEW configpub_workflow.revoked_snapshot`); err != nil {
		t.Fatal(err)
	}
	agent := in1.Targets[0]
	svc := e.service(t, workflowsvc.RevokedDeny)
	_, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "x"), EnvTag: "dev", WfDefID: onboarding, Version: "1.0.0",
		Binding: binding, Caller: &workflowsvc.Caller{Host: agent.Host, ServiceID: agent.ServiceID, PublicationID: pub1, PolicyDigest: agent.PolicyDigest}})
	if err == nil || !strings.Contains(err.Error(), "not migrated to version 30") {
		t.Fatalf("admit with a caller without the view: %v, want a refusal saying to migrate", err)
	}
	if _, err := svc.Admit(ctx, workflowsvc.AdmitRequest{InvocationID: id("inv", "y"), EnvTag: "dev", WfDefID: onboarding,
		Version: "1.0.0", Binding: binding}); err != nil {
		t.Fatalf("admit without a caller: %v", err)
	}
}
