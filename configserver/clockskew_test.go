package configserver_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver"
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
	e.runOn(time.Now) // the server on the wall clock: its Date is what the runtime measures
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
	e.runOn(time.Now) // the server on the wall clock: its Date is what the runtime measures
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

// TestDateIsTheServersClock: a Config Server given a clock of its own
// (Options.Clock; here three hours behind the wall clock, as a simulated
// clock in tests is) sends that clock's time as every answer's Date — a
// configuration, an error — which runtimes measure their skew against. It
// sent the wall clock's, so runtimes agreeing with the server's simulated
// clock measured themselves as off it by the simulation's distance and
// named their clock (CLOCK_SKEW) where a lease had simply ended (EXPIRED).
func TestDateIsTheServersClock(t *testing.T) {
	t.Parallel()
	offset := -3 * time.Hour
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: func() time.Time { return time.Now().Add(offset) }}})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("date-body-5d1e"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	tok := e.token(t, idA, "agent")
	for _, tc := range []struct {
		name, method, token string
		status              int
	}{
		{"GET", http.MethodGet, tok, http.StatusOK},
		{"HEAD", http.MethodHead, tok, http.StatusOK},
		{"unauthorized", http.MethodGet, "", http.StatusUnauthorized},
	} {
		resp, _ := e.do(t, tc.method, configsPath(idA), tc.token)
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
		date, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			t.Fatalf("%s: Date %q: %v", tc.name, resp.Header.Get("Date"), err)
		}
		if d := time.Since(date) + offset; d < -2*time.Second || d > 5*time.Second {
			t.Fatalf("%s: Date %s is %s off the server's clock (the wall clock %s)", tc.name, date, d, offset)
		}
	}
}
