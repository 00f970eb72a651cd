package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
)

// TestPinnedCurrentSnapshotFollowsItsLeaseRenewals: a session pinned to
// the snapshot that stays current is renewed with it. Over a simulated
// month of hourly renewals (each lease two hours long) Snapshot keeps
// answering with the pinned snapshot under the newest verified lease — it
// failed with ErrExpired two hours after the pin, although the runtime
// held the same snapshot under a valid lease. Once the renewals stop, the
// session fails closed at the end of the last one.
func TestPinnedCurrentSnapshotFollowsItsLeaseRenewals(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	base := w.spec(1)
	w.srv.set(w.build(base), nil)
	c := w.client()
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	deny, err := c.Pin(client.PinOptions{OnRevoke: client.DenyOnRevoke})
	if err != nil {
		t.Fatal(err)
	}
	allow, err := c.Pin(client.PinOptions{OnRevoke: client.AllowUntilLeaseEnds})
	if err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for h := int64(1); h <= 30*24; h++ {
		w.clock.Advance(time.Hour)
		now := w.clock.Now()
		renewed := base
		renewed.issuedAt = now
		renewed.leaseFrom, renewed.leaseTo = now, now.Add(2*time.Hour)
		w.srv.set(w.build(renewed), nil)
		ev, err := c.Load(ctx)
		if err != nil || ev.Reason != client.ReasonLeaseRenewed {
			t.Fatalf("hour %d: renewal load: %+v %v", h, ev, err)
		}
		last = renewed.leaseTo
		for _, s := range []*client.Pinned{deny, allow} {
			snap, err := s.Snapshot()
			if err != nil {
				t.Fatalf("hour %d: pinned session on the current, renewed snapshot: %v", h, err)
			}
			if snap.SnapshotID != deny.Pin().SnapshotID || !snap.ExpiresAt.Equal(last) {
				t.Fatalf("hour %d: pinned session answers %s until %s, want %s until %s", h,
					snap.SnapshotID, snap.ExpiresAt, deny.Pin().SnapshotID, last)
			}
		}
	}
	// The renewals stop: the session fails closed with the last lease.
	w.clock.Advance(last.Add(30 * time.Second).Sub(w.clock.Now()))
	for _, s := range []*client.Pinned{deny, allow} {
		if _, err := s.Snapshot(); !errors.Is(err, client.ErrExpired) {
			t.Fatalf("pinned session past its last renewed lease: %v, want ErrExpired", err)
		}
	}
}

// TestPinnedSessionLearnsRevocationAtItsNextRenewal: sessions pinned to the
// current snapshot, renewed hourly (two-hour leases) over simulated days.
// The snapshot is revoked: the Config Server stops serving it (404 on
// GET /configs, 403 on GET /configs/snapshots/{id}). At the runtime's next
// renewal load, refused 404, a deny session ends (ErrPinRevoked) while the
// runtime keeps its current snapshot until the lease ends, as the contract
// says of unsigned answers; an allow-until-lease-ends session runs to the
// end of its last lease. The session learnt it only from Check or an epoch
// raise, and ran on to its lease's end. A refusal that was not a
// revocation (the server answers 404 once, then renews the snapshot under
// a verified manifest) is cleared by that renewal, as a Check's is.
func TestPinnedSessionLearnsRevocationAtItsNextRenewal(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	base := w.spec(1)
	w.srv.set(w.build(base), nil)
	c := w.client()
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	renew := func() *release {
		w.clock.Advance(time.Hour)
		now := w.clock.Now()
		r := base
		r.issuedAt, r.leaseFrom, r.leaseTo = now, now, now.Add(2*time.Hour)
		return w.build(r)
	}
	deny, err := c.Pin(client.PinOptions{OnRevoke: client.DenyOnRevoke})
	if err != nil {
		t.Fatal(err)
	}
	allow, err := c.Pin(client.PinOptions{OnRevoke: client.AllowUntilLeaseEnds})
	if err != nil {
		t.Fatal(err)
	}
	for h := 1; h <= 3*24; h++ {
		w.srv.set(renew(), nil)
		if ev, err := c.Load(ctx); err != nil || ev.Reason != client.ReasonLeaseRenewed {
			t.Fatalf("hour %d: renewal load: %s %s %v", h, ev.Outcome, ev.Reason, err)
		}
	}

	// A 404 that was not a revocation, then the snapshot renewed again.
	w.srv.set(nil, nil)
	w.clock.Advance(time.Hour)
	if ev, _ := c.Load(ctx); ev.Reason != client.ReasonNotFound {
		t.Fatalf("load answered 404: %s %s, want UNAVAILABLE NOT_FOUND", ev.Outcome, ev.Reason)
	}
	if _, err := deny.Snapshot(); !errors.Is(err, client.ErrPinRevoked) {
		t.Fatalf("deny session after its renewal load was refused 404: %v, want ErrPinRevoked", err)
	}
	rel := renew()
	w.srv.set(rel, nil)
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if snap, err := deny.Snapshot(); err != nil || deny.Revoked() != "" || !snap.ExpiresAt.Equal(w.clock.Now().Add(2*time.Hour)) {
		t.Fatalf("deny session once the snapshot is renewed under a verified manifest: %v (revoked %q), want it back under the new lease", err, deny.Revoked())
	}

	// The snapshot is revoked.
	w.srv.set(nil, nil)
	w.srv.revoke(rel.Manifest.SnapshotID)
	if _, err := deny.Snapshot(); err != nil {
		t.Fatalf("before the next renewal load: %v", err)
	}
	w.clock.Advance(time.Hour)
	if ev, _ := c.Load(ctx); ev.Reason != client.ReasonNotFound {
		t.Fatalf("renewal load of the revoked snapshot: %s %s, want UNAVAILABLE NOT_FOUND", ev.Outcome, ev.Reason)
	}
	if err := c.Guard(); err != nil {
		t.Fatalf("the runtime's current snapshot after an unsigned 404: %v, want it kept until its lease ends", err)
	}
	if _, err := deny.Snapshot(); !errors.Is(err, client.ErrPinRevoked) {
		t.Fatalf("deny session at the renewal after the revocation: %v, want ErrPinRevoked", err)
	}
	if _, err := allow.Snapshot(); err != nil || allow.Revoked() == "" {
		t.Fatalf("allow session at the renewal after the revocation: %v (revoked %q), want it running, known revoked", err, allow.Revoked())
	}
	w.clock.Advance(time.Hour + 30*time.Second)
	if _, err := allow.Snapshot(); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("allow session past its last lease: %v, want ErrExpired", err)
	}
}
