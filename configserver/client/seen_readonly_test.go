package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/fsfault"
)

// TestReadOnlyCacheKeepsServingTheHeldSnapshot: a cache volume that turns
// read-only (a real tmpfs remounted read-only), or fills up, after the first
// load. Over a simulated month of hourly renewals of the snapshot held (each
// with a lease of two hours), the runtime keeps serving it: a renewal at the
// sequence and revocation epoch the seen-state file already holds needs no
// write, and is applied with the write failure noted in cacheError. Every
// renewal was refused SEEN_STATE_UNWRITABLE before, so the runtime failed
// closed when the lease it held last ran out. The replay protection stands:
// a manifest of a lower sequence is refused (in this process and in one
// restarted on that cache), and what would raise the floor — a renewal
// raising the revocation epoch, a pointer move — is refused
// SEEN_STATE_UNWRITABLE, after which the runtime fails closed once its lease
// ends. A runtime restarted on that cache, whose last-known-good's lease ran
// out long ago, takes the renewal of that snapshot all the same.
func TestReadOnlyCacheKeepsServingTheHeldSnapshot(t *testing.T) {
	for _, fault := range []struct {
		name  string
		apply func(*fsfault.Volume)
		err   string
	}{
		{"read-only", (*fsfault.Volume).ReadOnly, "read-only file system"},
		{"full", (*fsfault.Volume).Fill, "no space left on device"},
	} {
		t.Run(fault.name, func(t *testing.T) { keepsServingTheHeldSnapshot(t, fault.apply, fault.err) })
	}
}

func keepsServingTheHeldSnapshot(t *testing.T, fault func(*fsfault.Volume), wantErr string) {
	w := newWorld(t)
	vol := fsfault.New(t, 1<<20)
	w.dir = vol.Dir
	c := w.client()
	ctx := context.Background()

	old := w.spec(1) // an earlier pointer, replayed at the end
	oldRel := w.build(old)
	held := w.spec(2)
	held.envTo = t0.Add(90 * 24 * time.Hour)
	w.srv.set(w.build(held), nil)
	if ev, err := c.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("first load: %v %v, want APPLIED", ev.Outcome, err)
	}
	fault(vol)

	var last *client.Evidence
	for h := 1; h <= 30*24; h++ {
		w.clock.Advance(time.Hour)
		now := w.clock.Now()
		renewed := held
		renewed.issuedAt, renewed.leaseFrom, renewed.leaseTo = now, now, now.Add(2*time.Hour)
		w.srv.set(w.build(renewed), nil)
		ev, err := c.Load(ctx)
		if err != nil || ev.Outcome != client.OutcomeApplied || ev.Reason != client.ReasonLeaseRenewed {
			t.Fatalf("hour %d: %s %s (%s) %v, want APPLIED LEASE_RENEWED", h, ev.Outcome, ev.Reason, ev.Detail, err)
		}
		if !strings.Contains(ev.CacheError, "seen-state not persisted") || !strings.Contains(ev.CacheError, wantErr) {
			t.Fatalf("hour %d: cacheError %q, want the seen-state write failure noted", h, ev.CacheError)
		}
		if err := c.Guard(); err != nil {
			t.Fatalf("hour %d: the held snapshot is not served: %v", h, err)
		}
		last = ev
	}

	// A runtime restarted on that cache: its last-known-good is the first
	// load's, whose lease ran out a month ago, and nothing is current. The
	// renewal of that snapshot is taken without a write all the same (it
	// was refused SEEN_STATE_UNWRITABLE, and the runtime failed closed).
	w.clock.Advance(time.Minute)
	back := held
	back.issuedAt, back.leaseFrom, back.leaseTo = w.clock.Now(), w.clock.Now(), w.clock.Now().Add(2*time.Hour)
	w.srv.set(w.build(back), nil)
	rc := w.client()
	if ev, err := rc.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied || ev.Reason != client.ReasonLeaseRenewed || !strings.Contains(ev.CacheError, wantErr) {
		t.Fatalf("restarted on the cache a month on: %s %s (%s) cacheError %q %v, want APPLIED LEASE_RENEWED with the write failure noted",
			ev.Outcome, ev.Reason, ev.Detail, ev.CacheError, err)
	}
	if err := rc.Guard(); err != nil {
		t.Fatalf("restarted on the cache a month on: the renewed snapshot is not served: %v", err)
	}

	wantRefused := func(c *client.Client, what string, rel *release, reason client.Reason) {
		t.Helper()
		w.srv.set(rel, nil)
		ev, err := c.Load(ctx)
		if !errors.Is(err, client.ErrRejected) || ev.Reason != reason {
			t.Fatalf("%s: %s %s (%s) %v, want REJECTED %s", what, ev.Outcome, ev.Reason, ev.Detail, err, reason)
		}
	}
	wantRefused(c, "a manifest of a lower sequence", oldRel, client.ReasonSequenceRegression)
	restarted := w.client()
	wantRefused(restarted, "a lower sequence after a restart on the read-only cache", oldRel, client.ReasonSequenceRegression)

	w.clock.Advance(time.Minute)
	now := w.clock.Now()
	raised := held
	raised.manifestEpoch, raised.issuedAt, raised.leaseFrom, raised.leaseTo = 4, now, now, now.Add(2*time.Hour)
	wantRefused(c, "a renewal raising the revocation epoch", w.build(raised), client.ReasonSeenStateUnwritable)
	moved := w.spec(3)
	moved.issuedAt, moved.leaseFrom, moved.leaseTo = now, now, now.Add(2*time.Hour)
	wantRefused(c, "a pointer move", w.build(moved), client.ReasonSeenStateUnwritable)
	if cur, err := c.Current(); err != nil || cur.Manifest.Sequence != 2 {
		t.Fatalf("after the refusals: the held snapshot is not current (%v)", err)
	}
	end, _ := time.Parse(time.RFC3339, last.LeaseExpiresAt)
	w.clock.Set(end.Add(31 * time.Second)) // past the last lease plus the skew
	if err := c.Guard(); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("past the last lease: Guard %v, want ErrExpired (fail closed)", err)
	}
}
