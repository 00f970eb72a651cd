package promoter_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/configpub/configpub/promoter"
)

// TestEachTargetStatusStreamsWhatStatusHolds: the head and the targets read
// one at a time are exactly Status, in (host, serviceId) order; a
// callback's error stops the read after that target and comes back as it
// is; an environment without releases is ErrNotFound for both.
func TestEachTargetStatusStreamsWhatStatusHolds(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	f.promote(t, release("prod", 1, 0, 4, nil, nil))
	f.now = f.now.Add(minute)
	f.promote(t, release("prod", 2, 1, 3, func(i int) bool { return i == 1 }, func(int) int64 { return 1 }))

	whole, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	head, err := f.store.StatusHead(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	var each []promoter.TargetStatus
	if err := f.store.EachTargetStatus(ctx, "prod", func(ts *promoter.TargetStatus) error {
		each = append(each, *ts)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(head.Targets) != 0 || len(whole.Targets) != 4 {
		t.Fatalf("head has %d targets, status %d; want 0 and 4 (one retired)", len(head.Targets), len(whole.Targets))
	}
	head.Targets = each
	if !reflect.DeepEqual(head, whole) {
		t.Fatalf("head and targets one at a time:\n%+v\nStatus:\n%+v", head, whole)
	}
	for i := 1; i < len(each); i++ {
		a, b := each[i-1], each[i]
		if a.Host > b.Host || (a.Host == b.Host && a.ServiceID >= b.ServiceID) {
			t.Fatalf("targets out of order: %s/%s before %s/%s", a.Host, a.ServiceID, b.Host, b.ServiceID)
		}
	}

	stop := errors.New("enough")
	calls := 0
	err = f.store.EachTargetStatus(ctx, "prod", func(*promoter.TargetStatus) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Fatalf("callback error: got %v after %d calls, want the callback's own error after 1", err, calls)
	}

	if _, err := f.store.StatusHead(ctx, "nowhere"); !errors.Is(err, promoter.ErrNotFound) {
		t.Fatalf("head of an unknown environment: got %v, want ErrNotFound", err)
	}
	err = f.store.EachTargetStatus(ctx, "nowhere", func(*promoter.TargetStatus) error { return nil })
	if !errors.Is(err, promoter.ErrNotFound) {
		t.Fatalf("targets of an unknown environment: got %v, want ErrNotFound", err)
	}
}
