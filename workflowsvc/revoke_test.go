package workflowsvc_test

import (
	"context"
	"errors"
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
