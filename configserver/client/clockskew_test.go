package client_test

import (
	"context"
	"errors"
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

// TestClockAheadIsNamed: a runtime whose clock is 20 minutes ahead of the
// server's (simulated clocks) finds a renewal with a 15-minute lease already
// expired; the refusal is CLOCK_SKEW naming the offset, not EXPIRED, which
// did not say that it is this runtime's clock that is wrong (its own lease
// ends early by as much, so it fails closed without a word on why). A lease
// that has ended by the server's clock too is still EXPIRED.
func TestClockAheadIsNamed(t *testing.T) {
	w := newWorld(t)
	runtime := simclock.New(t0.Add(20 * time.Minute))
	c := w.client(func(o *client.Options) { o.Clock = runtime })
	ctx := context.Background()

	s1 := w.spec(1) // [t0-1h, t0+2h): valid on both clocks
	w.srv.set(w.build(s1), nil)
	mustLoad(t, c, client.OutcomeApplied)

	renewed := s1
	renewed.issuedAt, renewed.leaseFrom, renewed.leaseTo = t0, t0, t0.Add(15*time.Minute)
	w.srv.set(w.build(renewed), nil)
	ev, err := c.Load(ctx)
	if err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonClockSkew || !strings.Contains(ev.Detail, "20m0s ahead") {
		t.Fatalf("a renewal expired by this clock only: got %s %s (%s), want REJECTED CLOCK_SKEW naming 20m0s ahead", ev.Outcome, ev.Reason, ev.Detail)
	}
	if cur, err := c.Current(); err != nil || cur.Manifest.Sequence != 1 {
		t.Fatalf("the current snapshot was not kept: %v", err)
	}

	ended := s1
	ended.issuedAt, ended.leaseFrom, ended.leaseTo = t0.Add(-time.Hour+time.Minute), t0.Add(-time.Hour), t0.Add(-time.Minute)
	w.srv.set(w.build(ended), nil)
	if ev, _ := c.Load(ctx); ev.Reason != client.ReasonExpired {
		t.Fatalf("a lease ended by both clocks: got %s %s, want EXPIRED", ev.Outcome, ev.Reason)
	}

	// Within the skew (30s) of the server's clock, nothing is named.
	runtime.Set(t0.Add(15*time.Minute + 20*time.Second))
	w.srv.set(w.build(renewed), nil)
	if ev, _ := c.Load(ctx); ev.Outcome != client.OutcomeApplied {
		t.Fatalf("a clock within the skew: got %s %s (%s), want APPLIED", ev.Outcome, ev.Reason, ev.Detail)
	}
}

// TestClockSkewIsNamedOnEveryPath: a candidate prefetch and a pinned
// session's re-hydration and check name this runtime's clock, behind or
// ahead of the server's, as a load does: the prefetch is UNAVAILABLE
// CLOCK_SKEW (not a verdict on the candidate, and not CANDIDATE_LEASE_STALE,
// which sends the operator to the promoter's renewals) and leaves the
// candidate slot empty; the pinned session's refusal is CLOCK_SKEW. Both
// said NOT_YET_VALID or EXPIRED with no hint.
func TestClockSkewIsNamedOnEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name     string
		offset   time.Duration // the runtime's clock minus the server's
		from, to time.Time     // the lease served
		want     string
	}{
		{"behind", -10 * time.Minute, t0.Add(-time.Minute), t0.Add(15 * time.Minute), "10m0s behind"},
		{"ahead", 20 * time.Minute, t0.Add(-time.Minute), t0.Add(15 * time.Minute), "20m0s ahead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			runtime := simclock.New(t0)
			c := w.client(func(o *client.Options) { o.Clock = runtime })
			ctx := context.Background()
			s1 := w.spec(1)
			w.srv.set(w.build(s1), nil)
			mustLoad(t, c, client.OutcomeApplied)
			pin, err := c.Pin(client.PinOptions{})
			if err != nil {
				t.Fatal(err)
			}
			runtime.Set(t0.Add(tc.offset))

			cs := w.candidateSpec(2)
			cs.issuedAt, cs.leaseFrom, cs.leaseTo = tc.from, tc.from, tc.to
			w.srv.setCandidate(w.build(cs))
			ev, err := c.Prefetch(ctx)
			if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrRejected) || ev.Outcome != client.OutcomeUnavailable ||
				ev.Reason != client.ReasonClockSkew || !strings.Contains(ev.Detail, tc.want) {
				t.Fatalf("prefetch: got %s %s (%s) %v, want UNAVAILABLE CLOCK_SKEW naming %s", ev.Outcome, ev.Reason, ev.Detail, err, tc.want)
			}
			if st := c.Status(); st.Candidate != nil {
				t.Fatalf("prefetch: the candidate slot holds %+v, want none", st.Candidate)
			}

			renewed := s1
			renewed.issuedAt, renewed.leaseFrom, renewed.leaseTo = tc.from, tc.from, tc.to
			w.srv.set(w.build(renewed), nil) // what GET /configs/snapshots/{id} serves
			wantSkew := func(what string, err error) {
				t.Helper()
				var ve *client.VerificationError
				if !errors.As(err, &ve) || ve.Reason != client.ReasonClockSkew || !strings.Contains(ve.Detail, tc.want) {
					t.Fatalf("%s: got %v, want CLOCK_SKEW naming %s", what, err, tc.want)
				}
			}
			_, err = c.Rehydrate(ctx, pin.Pin(), client.PinOptions{})
			wantSkew("rehydrate", err)
			wantSkew("check", pin.Check(ctx))
			if pin.Revoked() != "" {
				t.Fatalf("check: the pinned snapshot is marked revoked (%s) for a clock skew", pin.Revoked())
			}
		})
	}
}

// TestClockSkewIsNamedOnTheOCIPath: an artifact pulled from a registry
// whose signed delivery manifest's lease this runtime's clock alone refuses
// is CLOCK_SKEW naming the offset, measured from the registry's Date when
// the runtime uses no Config Server and from the Config Server's (its HEAD
// /configs answer) when it does; it said NOT_YET_VALID or EXPIRED with no
// hint. Without any Date nothing is named.
func TestClockSkewIsNamedOnTheOCIPath(t *testing.T) {
	for _, tc := range []struct {
		name       string
		offset     time.Duration // the runtime's clock minus the servers'
		server     bool          // a Config Server too
		registryAt time.Time     // the registry's Date; zero: none
		want       client.Reason
		detail     string
	}{
		{"behind, the registry's Date", -10 * time.Minute, false, t0, client.ReasonClockSkew, "10m0s behind the registry's"},
		{"ahead, the registry's Date", 20 * time.Minute, false, t0, client.ReasonClockSkew, "20m0s ahead of the registry's"},
		{"behind, the Config Server's Date", -10 * time.Minute, true, t0, client.ReasonClockSkew, "10m0s behind the server's"},
		{"ahead, no Date", 20 * time.Minute, false, time.Time{}, client.ReasonExpired, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			s := w.spec(1)
			s.issuedAt, s.leaseFrom, s.leaseTo = t0.Add(-time.Minute), t0.Add(-time.Minute), t0.Add(15*time.Minute)
			r := w.build(s)
			w.srv.set(r, nil)
			c := w.client(func(o *client.Options) {
				o.Clock = simclock.New(t0.Add(tc.offset))
				if !tc.server {
					o.ServerURL = ""
				}
			})
			a := ociArtifact(r)
			a.Date = tc.registryAt
			ev, err := c.LoadOCI(context.Background(), stubPuller{a}, a.Ref)
			if !errors.Is(err, client.ErrRejected) || ev.Reason != tc.want || !strings.Contains(ev.Detail, tc.detail) {
				t.Fatalf("got %s %s (%s) %v, want REJECTED %s naming %q", ev.Outcome, ev.Reason, ev.Detail, err, tc.want, tc.detail)
			}
		})
	}
}
