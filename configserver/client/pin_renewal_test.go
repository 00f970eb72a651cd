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
