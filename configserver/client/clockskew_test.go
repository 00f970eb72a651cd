package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/simclock"
)

// TestClockSkewIsNamed: a runtime whose clock is 10 minutes behind the
// server's (simulated clocks: the server's Date is the world's clock)
// refuses a lease renewal (304) and a rollback (200) that each start their
// lease at their issue time; the refusal is CLOCK_SKEW with the measured
// offset, not NOT_YET_VALID, which did not say that it is this runtime's
// clock that is wrong. A manifest not yet valid by the server's clock too
// is still NOT_YET_VALID.
func TestClockSkewIsNamed(t *testing.T) {
	w := newWorld(t) // w.clock is the server's clock, sent as Date
	runtime := simclock.New(t0.Add(-10 * time.Minute))
	c := w.client(func(o *client.Options) { o.Clock = runtime })
	ctx := context.Background()

	s1 := w.spec(1)
	s1.leaseFrom, s1.leaseTo = t0.Add(-20*time.Minute), t0.Add(5*time.Minute) // valid on both clocks
	w.srv.set(w.build(s1), nil)
	if ev, err := c.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("first load: %v %v, want APPLIED", ev.Outcome, err)
	}

	wantSkew := func(what string) {
		t.Helper()
		ev, err := c.Load(ctx)
		if err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonClockSkew || !strings.Contains(ev.Detail, "10m0s behind") {
			t.Fatalf("%s: got %s %s (%s), want REJECTED CLOCK_SKEW naming 10m0s", what, ev.Outcome, ev.Reason, ev.Detail)
		}
		if cur, err := c.Current(); err != nil || cur.Manifest.Sequence != 1 {
			t.Fatalf("%s: the current snapshot was not kept: %v", what, err)
		}
	}
	renewed := s1
	renewed.issuedAt, renewed.leaseFrom, renewed.leaseTo = t0.Add(-time.Minute), t0.Add(-time.Minute), t0.Add(15*time.Minute)
	w.srv.set(w.build(renewed), nil)
	wantSkew("a renewal answered 304")

	rollback := w.spec(2)
	rollback.issuedAt, rollback.leaseFrom, rollback.leaseTo = t0, t0, t0.Add(15*time.Minute)
	w.srv.set(w.build(rollback), nil)
	wantSkew("a rollback answered 200")

	// A lease that starts after the server's clock too (its signer's clock
	// is ahead): setting this runtime's clock right would not help.
	ahead := w.spec(3)
	ahead.issuedAt, ahead.leaseFrom, ahead.leaseTo = t0.Add(time.Hour), t0.Add(time.Hour), t0.Add(2*time.Hour)
	w.srv.set(w.build(ahead), nil)
	if ev, _ := c.Load(ctx); ev.Reason != client.ReasonNotYetValid {
		t.Fatalf("a lease starting after both clocks: got %s %s, want NOT_YET_VALID", ev.Outcome, ev.Reason)
	}
}
