package configserver_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
)

// TestClientNamesItsClockBehindTheServer: the real Config Server moves a
// pointer now (its lease starts at the move); a runtime whose clock stands
// 10 minutes behind refuses it as CLOCK_SKEW with the offset measured from
// the answer's Date, where it said NOT_YET_VALID — every renewal and every
// move, a rollback included, until it failed closed, with nothing naming
// its clock.
func TestClientNamesItsClockBehindTheServer(t *testing.T) {
	t.Parallel()
	e, _, r2 := goldenEnv(t)
	now := time.Now().UTC().Truncate(time.Second)
	e.seed.moveAt(t, r2, now, 5*time.Minute, 15*time.Minute)
	waitServed(t, e, r2.Identity, r2.Audience, r2.ID)
	c := goldenClient(t, e, e.srv.URL, func(o *client.Options) { o.Clock = fixedClock{now.Add(-10 * time.Minute)}; o.Skew = 30 * time.Second })
	ev, err := c.Load(context.Background())
	if err == nil || ev.Reason != client.ReasonClockSkew || ev.SnapshotID != r2.ID {
		t.Fatalf("load with the runtime's clock 10m behind: got %s %s for %s (%s), want REJECTED CLOCK_SKEW for %s", ev.Outcome, ev.Reason, ev.SnapshotID, ev.Detail, r2.ID)
	}
	if !regexp.MustCompile(`clock is 10m[0-5]s behind the server's`).MatchString(ev.Detail) {
		t.Fatalf("detail %q does not name the offset of about 10 minutes", ev.Detail)
	}
}

// TestClientNamesItsClockAheadOfTheServer: the real Config Server moves a
// pointer now with a 15-minute lease; a runtime whose clock stands 20
// minutes ahead finds it ended, and refuses it as CLOCK_SKEW with the
// offset measured from the answer's Date, where it said EXPIRED (its own
// lease ends as early, so it failed closed with nothing naming its clock).
// A pinned session re-hydrated on that clock says so too.
func TestClientNamesItsClockAheadOfTheServer(t *testing.T) {
	t.Parallel()
	e, _, r2 := goldenEnv(t)
	now := time.Now().UTC().Truncate(time.Second)
	e.seed.moveAt(t, r2, now, 5*time.Minute, 15*time.Minute)
	waitServed(t, e, r2.Identity, r2.Audience, r2.ID)
	c := goldenClient(t, e, e.srv.URL, func(o *client.Options) { o.Clock = fixedClock{now.Add(20 * time.Minute)}; o.Skew = 30 * time.Second })
	ev, err := c.Load(context.Background())
	if err == nil || ev.Reason != client.ReasonClockSkew || ev.SnapshotID != r2.ID {
		t.Fatalf("load with the runtime's clock 20m ahead: got %s %s for %s (%s), want REJECTED CLOCK_SKEW for %s", ev.Outcome, ev.Reason, ev.SnapshotID, ev.Detail, r2.ID)
	}
	offset := regexp.MustCompile(`clock is (19m[1-5][0-9]s|20m0s) ahead of the server's`)
	if !offset.MatchString(ev.Detail) {
		t.Fatalf("detail %q does not name the offset of about 20 minutes", ev.Detail)
	}
	_, err = c.Rehydrate(context.Background(), client.Pin{SnapshotID: r2.ID, PolicySnapshotID: r2.PolicySnapshotID, PolicyDigest: r2.PolicyDigest,
		PublicationID: r2.PublicationID, ContentDigest: r2.ContentDigest, ArtifactDigest: r2.ArtifactDigest}, client.PinOptions{})
	var ve *client.VerificationError
	if !errors.As(err, &ve) || ve.Reason != client.ReasonClockSkew || !offset.MatchString(ve.Detail) {
		t.Fatalf("rehydrate with the runtime's clock 20m ahead: got %v, want CLOCK_SKEW naming about 20 minutes", err)
	}
}
