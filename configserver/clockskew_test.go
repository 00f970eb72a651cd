package configserver_test

import (
	"context"
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
