package promoter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/promoter"
)

// listen opens a second connection LISTENing on configpub_pointer, as a
// Config Server does.
func listen(t *testing.T, f *fixture) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN configpub_pointer"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// rawNotification waits up to wait for the next notification's payload.
func rawNotification(conn *pgx.Conn, wait time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	n, err := conn.WaitForNotification(ctx)
	if err != nil {
		return "", err
	}
	return n.Payload, nil
}

func TestRevokeNotifiesConfigServersToReloadEverything(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   func(r promoter.ReleaseInput) promoter.RevokeInput
		want func(r promoter.ReleaseInput, id int64) string
	}{
		{
			name: "snapshot",
			in: func(r promoter.ReleaseInput) promoter.RevokeInput {
				return promoter.RevokeInput{SnapshotID: r.Targets[0].SnapshotID}
			},
			want: func(r promoter.ReleaseInput, id int64) string {
				return fmt.Sprintf(`{"revoked":true,"revocationId":%d,"snapshotId":%q}`, id, r.Targets[0].SnapshotID)
			},
		},
		{
			name: "publication",
			in: func(r promoter.ReleaseInput) promoter.RevokeInput {
				return promoter.RevokeInput{PublicationID: r.Targets[0].PublicationID}
			},
			want: func(r promoter.ReleaseInput, id int64) string {
				return fmt.Sprintf(`{"revoked":true,"revocationId":%d,"publicationId":%q}`, id, r.Targets[0].PublicationID)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			ctx := context.Background()
			listener := listen(t, f)
			r1 := release("prod", 1, 0, 2, nil, nil)
			f.promote(t, r1)
			if _, err := rawNotification(listener, 5*time.Second); err != nil { // the activation's one batch
				t.Fatalf("activation notification: %v", err)
			}

			in := tc.in(r1)
			in.CommandID, in.Reason, in.Actor = moveID("rev-"+tc.name), "leaked limit", "sec"
			rev, err := f.store.Revoke(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(rev.Current) == 0 {
				t.Fatalf("got no current identities in %+v, want the revoked current pointer", rev)
			}
			got, err := rawNotification(listener, 5*time.Second)
			if err != nil {
				t.Fatalf("no notification after a revocation: %v", err)
			}
			if want := tc.want(r1, rev.RevocationID); got != want {
				t.Fatalf("got payload %s, want %s", got, want)
			}

			// A replay changes nothing and sends nothing.
			again, err := f.store.Revoke(ctx, in)
			if err != nil || !again.Replayed {
				t.Fatalf("got %+v %v, want a replay", again, err)
			}
			if p, err := rawNotification(listener, 300*time.Millisecond); err == nil {
				t.Fatalf("got notification %s after a replay, want none", p)
			}
		})
	}
}

func TestARefusedRevokeSendsNoNotification(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	listener := listen(t, f)
	_, err := f.store.Revoke(context.Background(), promoter.RevokeInput{CommandID: moveID("rev-unknown"),
		SnapshotID: moveID("no-such-snapshot"), Reason: "r", Actor: "sec"})
	if !errors.Is(err, promoter.ErrNotFound) {
		t.Fatalf("revoking an unknown snapshot: got %v, want ErrNotFound", err)
	}
	if p, err := rawNotification(listener, 300*time.Millisecond); err == nil {
		t.Fatalf("got notification %s after a refused revocation, want none", p)
	}
}

// TestRevokingAPublicationListsTheFirstAndCountsAll revokes the publication
// of a 150-target release (one target retired since): the result counts
// the 149 current identities and lists the first RevokedListed in identity
// order, says it covers the 150 snapshots and no Workflow view, and a
// replay returns the same.
func TestRevokingAPublicationListsTheFirstAndCountsAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	const n = 150
	r1 := release("prod", 1, 0, n, nil, nil)
	f.promote(t, r1)
	f.now = f.now.Add(minute)
	r2 := release("prod", 2, 1, n-1, func(int) bool { return false }, func(int) int64 { return 1 })
	f.promote(t, r2) // host-00149 retired, the rest unchanged
	in := promoter.RevokeInput{CommandID: moveID("rev-pub"), PublicationID: r1.Targets[0].PublicationID,
		Reason: "leaked limit", Actor: "sec"}
	rev, err := f.store.Revoke(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if rev.CurrentCount != n-1 || len(rev.Current) != promoter.RevokedListed {
		t.Fatalf("%d current identities listed, %d counted; want %d, %d", len(rev.Current), rev.CurrentCount,
			promoter.RevokedListed, n-1)
	}
	for i, id := range rev.Current {
		if want := fmt.Sprintf("host-%05d/svc/prod", i); id != want {
			t.Fatalf("current[%d] = %s, want %s", i, id, want)
		}
	}
	// It covers the publication's snapshots (the 150 release 1 created)
	// and no Workflow view.
	if rev.Covers != promoter.RevokedSnapshots || rev.Snapshots != n || rev.WorkflowViews != 0 {
		t.Fatalf("covers %q: %d snapshots, %d Workflow views; want %q: %d, 0", rev.Covers, rev.Snapshots, rev.WorkflowViews,
			promoter.RevokedSnapshots, n)
	}
	again, err := f.store.Revoke(ctx, in)
	if err != nil || !again.Replayed || again.CurrentCount != rev.CurrentCount || again.Covers != rev.Covers || again.Snapshots != n ||
		strings.Join(again.Current, ",") != strings.Join(rev.Current, ",") {
		t.Fatalf("replay %+v, %v; want the same result replayed", again, err)
	}
}

// TestRenewalAndReSigningListTheFirstSkippedAndCountAll revokes the
// publication of a 150-target release and then renews every lease and
// raises the epoch, 40 pointers a batch: each result counts the 150
// identities it skipped and lists the first SkippedListed in identity
// order, and a replay of the epoch raise (its recorded result) returns the
// same.
func TestRenewalAndReSigningListTheFirstSkippedAndCountAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *promoter.Options) { o.MoveBatch = 40 })
	ctx := context.Background()
	const n = 150
	r1 := release("prod", 1, 0, n, nil, nil)
	f.promote(t, r1)
	if _, err := f.store.Revoke(ctx, promoter.RevokeInput{CommandID: moveID("rev-pub"), PublicationID: r1.Targets[0].PublicationID,
		Reason: "leaked limit", Actor: "sec"}); err != nil {
		t.Fatal(err)
	}
	check := func(what string, done, count int, listed []string) {
		t.Helper()
		if done != 0 || count != n || len(listed) != promoter.SkippedListed {
			t.Fatalf("%s: %d done, %d skipped, %d listed; want 0, %d, %d", what, done, count, len(listed), n, promoter.SkippedListed)
		}
		for i, id := range listed {
			if want := fmt.Sprintf("host-%05d/svc/prod", i); id != want {
				t.Fatalf("%s: skipped[%d] = %s, want %s", what, i, id, want)
			}
		}
	}
	f.now = f.now.Add(minute)
	res, err := f.store.RenewLeases(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	check("renewal", res.Renewed, res.SkippedCount, res.Skipped)
	f.now = f.now.Add(minute)
	in := promoter.EpochInput{CommandID: moveID("epoch"), EnvTag: "prod", Epoch: 2, Actor: "sec", Reason: "leak"}
	ep, err := f.store.RaiseEpoch(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	check("epoch raise", ep.Resigned, ep.SkippedCount, ep.Skipped)
	again, err := f.store.RaiseEpoch(ctx, in)
	if err != nil || !again.Replayed {
		t.Fatalf("replay: %+v, %v", again, err)
	}
	check("epoch raise replayed", again.Resigned, again.SkippedCount, again.Skipped)
}

// TestRevocationsListWhatWasRevoked: an environment's revocations, newest
// first, say what was revoked (a snapshot and its target, or a publication
// and the release that created it), how many snapshots it covers and how
// many current pointers are still at one of them, with actor, reason and
// time; another environment's are not listed.
func TestRevocationsListWhatWasRevoked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	p1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, p1)
	d1 := release("dev", 1, 0, 2, nil, nil)
	f.promote(t, d1)
	revoke := func(in promoter.RevokeInput, name, reason string) {
		t.Helper()
		in.CommandID, in.Reason, in.Actor = moveID(name), reason, "sec"
		if _, err := f.store.Revoke(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	revoke(promoter.RevokeInput{SnapshotID: p1.Targets[1].SnapshotID}, "rev-snap", "leaked prompt")
	f.now = f.now.Add(time.Minute)
	revoke(promoter.RevokeInput{PublicationID: d1.Targets[0].PublicationID}, "rev-dev", "bad dev release")
	f.now = f.now.Add(time.Minute)
	revoke(promoter.RevokeInput{PublicationID: p1.Targets[0].PublicationID}, "rev-pub", "bad release")

	got, err := f.store.Revocations(ctx, "prod", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("prod revocations: got %+v, want 2 (dev's not listed)", got)
	}
	pub, snap := got[0], got[1]
	if pub.PublicationID != p1.Targets[0].PublicationID || pub.SnapshotID != "" || pub.ReleaseVersion != 1 ||
		pub.Snapshots != 3 || pub.Current != 3 || pub.Reason != "bad release" || pub.Actor != "sec" {
		t.Errorf("newest: got %+v, want release 1's publication: 3 snapshots, 3 current pointers at them", pub)
	}
	if snap.SnapshotID != p1.Targets[1].SnapshotID || snap.PublicationID != "" || snap.Host != p1.Targets[1].Host ||
		snap.ServiceID != p1.Targets[1].ServiceID || snap.ReleaseVersion != 1 || snap.Snapshots != 1 || snap.Current != 1 ||
		snap.Reason != "leaked prompt" || !snap.RevokedAt.Before(pub.RevokedAt) {
		t.Errorf("oldest: got %+v, want the snapshot of %s/%s, current, revoked before the publication",
			snap, p1.Targets[1].Host, p1.Targets[1].ServiceID)
	}
	if one, err := f.store.Revocations(ctx, "prod", 1); err != nil || len(one) != 1 || one[0].RevocationID != pub.RevocationID {
		t.Errorf("limit 1: got %+v, %v; want the newest only", one, err)
	}
	if dev, err := f.store.Revocations(ctx, "dev", 0); err != nil || len(dev) != 1 || dev[0].Snapshots != 2 || dev[0].Reason != "bad dev release" {
		t.Errorf("dev revocations: got %+v, %v; want its publication (2 snapshots)", dev, err)
	}
	if _, err := f.store.Revocations(ctx, "nope", 0); !errors.Is(err, promoter.ErrNotFound) {
		t.Errorf("unknown environment: got %v, want ErrNotFound", err)
	}
}
