package promoter_test

import (
	"context"
	"testing"

	"github.com/configpub/configpub/promoter"
)

// TestPromoterRoleSuffices runs the whole protocol as a member of
// configpub_promoter: its least-privilege grants are enough, and nothing
// needs the owner.
func TestPromoterRoleSuffices(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	pool := f.db.PoolURL(t, f.db.URLFor(t, "configpub_promoter"))
	s, err := promoter.Open(ctx, pool, promoter.Options{Signer: f.key})
	if err != nil {
		t.Fatal(err)
	}
	r1 := release("prod", 1, 0, 2, nil, nil)
	r2 := release("prod", 2, 1, 2, nil, nil)
	for _, in := range []promoter.ReleaseInput{r1, r2, r2} {
		if _, err := s.RecordAndActivate(ctx, in); err != nil {
			t.Fatalf("promote %d as configpub_promoter: %v", in.ReleaseVersion, err)
		}
	}
	if _, err := s.Rollback(ctx, promoter.RollbackInput{CommandID: moveID("r"), EnvTag: "prod", ToRelease: 1, Actor: "a", Reason: "r"}); err != nil {
		t.Fatalf("rollback as configpub_promoter: %v", err)
	}
	if _, err := s.RenewLeases(ctx, "prod"); err != nil {
		t.Fatalf("renew as configpub_promoter: %v", err)
	}
	if _, err := s.Revoke(ctx, promoter.RevokeInput{CommandID: moveID("v"), SnapshotID: r2.Targets[0].SnapshotID, Reason: "x", Actor: "a"}); err != nil {
		t.Fatalf("revoke as configpub_promoter: %v", err)
	}
	if _, err := s.Reconcile(ctx, "prod"); err != nil {
		t.Fatalf("reconcile as configpub_promoter: %v", err)
	}
	if _, err := s.Status(ctx, "prod"); err != nil {
		t.Fatalf("status as configpub_promoter: %v", err)
	}
	if _, err := s.History(ctx, "prod", promoter.HistoryFilter{Limit: 3}); err != nil {
		t.Fatalf("history as configpub_promoter: %v", err)
	}
	f.wantPointersAt(t, r1)
	// The promoter can still not rewrite history.
	if _, err := pool.Exec(ctx, "DELETE FROM configpub.pointer_move"); err == nil {
		t.Fatal("configpub_promoter deleted pointer moves")
	}
}
