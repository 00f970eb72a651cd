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

// TestPinnedCheckKeepsANewerLeaseThanALaggingReplicas: a session pinned to
// the current snapshot, renewed hourly (two-hour leases) over two
// simulated days, checks it every six hours through a load balancer whose
// replica answering GET /configs/snapshots/{id} is one renewal behind (a
// lagging hot standby): its manifest verifies, but is older than the one
// the session holds. Then the pointer moves on, and the session — no
// longer following the runtime's current snapshot — is checked again
// through that replica: it keeps the newer lease and runs to its end (it
// took the older one and failed with ErrExpired an hour early). A session
// a refusal marked revoked stays so when the lagging replica then serves
// the older manifest (it cleared the mark).
func TestPinnedCheckKeepsANewerLeaseThanALaggingReplicas(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	base := w.spec(1)
	prev := w.build(base)
	w.srv.set(prev, nil)
	c := w.client()
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := c.Pin(client.PinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	marked, err := c.Pin(client.PinOptions{OnRevoke: client.AllowUntilLeaseEnds})
	if err != nil {
		t.Fatal(err)
	}
	sid := s.Pin().SnapshotID
	lagging := func(rel *release) {
		w.srv.mu.Lock()
		w.srv.history[sid] = rel
		w.srv.mu.Unlock()
	}
	var newest, before *release
	var newestTo time.Time
	for h := 1; h <= 2*24; h++ {
		w.clock.Advance(time.Hour)
		now := w.clock.Now()
		r := base
		r.issuedAt, r.leaseFrom, r.leaseTo = now, now, now.Add(2*time.Hour)
		before = newest
		newest, newestTo = w.build(r), r.leaseTo
		w.srv.set(newest, nil)
		if _, err := c.Load(ctx); err != nil {
			t.Fatalf("hour %d: renewal load: %v", h, err)
		}
		if h%6 == 0 {
			lagging(prev) // the standby has the renewal before
			if err := s.Check(ctx); err != nil || s.Revoked() != "" {
				t.Fatalf("hour %d: Check answered by the lagging replica: %v (revoked %q)", h, err, s.Revoked())
			}
		}
		if snap, err := s.Snapshot(); err != nil || !snap.ExpiresAt.Equal(r.leaseTo) {
			t.Fatalf("hour %d: %v, want the lease until %s", h, err, r.leaseTo)
		}
		prev = newest
	}
	for _, p := range []*client.Pinned{s, marked} {
		if _, err := p.Snapshot(); err != nil { // both hold the newest lease
			t.Fatal(err)
		}
	}

	// The pointer moves on; the pinned snapshot is no longer renewed.
	w.clock.Advance(time.Minute)
	moved := w.spec(2)
	moved.issuedAt, moved.leaseFrom, moved.leaseTo = w.clock.Now(), w.clock.Now(), w.clock.Now().Add(2*time.Hour)
	w.srv.set(w.build(moved), nil)
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	w.srv.revoke(sid)
	if err := marked.Check(ctx); err != nil || marked.Revoked() == "" {
		t.Fatalf("Check refused 403: %v (revoked %q), want it marked revoked", err, marked.Revoked())
	}
	lagging(before) // the renewal before the newest, still within its lease
	for _, p := range []*client.Pinned{s, marked} {
		if err := p.Check(ctx); err != nil {
			t.Fatalf("Check answered by the lagging replica after the move: %v", err)
		}
	}
	if marked.Revoked() == "" {
		t.Fatal("a lagging replica's older manifest cleared the revocation mark a refusal left")
	}
	w.clock.Advance(70 * time.Minute) // past the older lease, within the newest
	for _, p := range []*client.Pinned{s, marked} {
		if snap, err := p.Snapshot(); err != nil || !snap.ExpiresAt.Equal(newestTo) {
			t.Fatalf("after the move and a Check one renewal behind: %v; want the newest lease until %s", err, newestTo)
		}
	}
}
