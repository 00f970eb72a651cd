package promoter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/promoter"
)

// TestSigningRefusesAClockFarFromTheDatabases: a renewer whose clock ran
// minutes behind signed leases that did not extend, then leases already
// ended, and printed "renewed" every round while every runtime failed
// closed. A store whose clock is further than MaxClockSkew from the
// database server's now refuses to sign — promote, renew — naming the
// skew and its direction, and signs again once the clock is right.
func TestSigningRefusesAClockFarFromTheDatabases(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64 // nanoseconds the store's clock is off
	f := newFixture(t, func(o *promoter.Options) {
		o.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		o.MaxClockSkew = 5 * time.Second
	})
	ctx := context.Background()
	r1 := release("prod", 1, 0, 2, nil, nil)
	now := time.Now()
	for i := range r1.Targets { // activatable around the real time
		r1.Targets[i].ValidFrom, r1.Targets[i].ExpiresAt = now.Add(-time.Hour), now.Add(24*time.Hour)
	}
	for _, c := range []struct {
		off  time.Duration
		want string
	}{{-250 * time.Second, "behind"}, {250 * time.Second, "ahead of"}} {
		offset.Store(int64(c.off))
		_, err := f.store.RecordAndActivate(ctx, r1)
		if !errors.Is(err, promoter.ErrClockSkew) || !strings.Contains(err.Error(), c.want+" the database server's") {
			t.Fatalf("promote with the clock %s off: got %v, want ErrClockSkew saying %q", c.off, err, c.want)
		}
	}
	if _, err := f.store.Status(ctx, "prod"); !errors.Is(err, promoter.ErrNotFound) {
		t.Fatalf("after the refused promotions: status %v, want nothing recorded", err)
	}
	offset.Store(int64(-2 * time.Second)) // within the skew
	if _, err := f.store.RecordAndActivate(ctx, r1); err != nil {
		t.Fatalf("promote with the clock 2 s behind: %v", err)
	}
	if _, err := f.store.RenewLeases(ctx, "prod"); err != nil {
		t.Fatalf("renew with the clock 2 s behind: %v", err)
	}
	before := leaseEnds(t, f)
	offset.Store(int64(-250 * time.Second))
	if _, err := f.store.RenewLeases(ctx, "prod"); !errors.Is(err, promoter.ErrClockSkew) {
		t.Fatalf("renew with the clock 250 s behind: got %v, want ErrClockSkew", err)
	}
	if after := leaseEnds(t, f); !after.Equal(before) {
		t.Errorf("a refused renewal moved the leases' end from %s to %s", before, after)
	}
}

// leaseEnds is the latest lease end of prod's current pointers.
func leaseEnds(t *testing.T, f *fixture) time.Time {
	t.Helper()
	var end time.Time
	if err := f.pool.QueryRow(context.Background(), `SELECT max(lease_expires_at) FROM configpub.current_pointer WHERE env_tag = 'prod'`).Scan(&end); err != nil {
		t.Fatal(err)
	}
	return end
}
