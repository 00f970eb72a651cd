package readback

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/simclock"
)

// TestNoticesAreThrottled: the console hears of an environment's first new
// receipt at once and then at most once every noticeEvery, whatever the
// number of receipts; flush sends what is still due, and a notification
// that failed stays due.
func TestNoticesAreThrottled(t *testing.T) {
	clock := simclock.New(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	var sent []string
	fail := false
	n := newNotices(clock.Now, func(_ context.Context, env string) error {
		if fail {
			return errors.New("connection lost")
		}
		sent = append(sent, env)
		return nil
	})
	ctx := context.Background()
	for range 1000 { // a readback round of one environment, in under a second
		n.changed(ctx, "prod")
	}
	n.changed(ctx, "dev")
	if want := []string{"prod", "dev"}; !slices.Equal(sent, want) {
		t.Fatalf("after 1,000 receipts of prod and one of dev: sent %v, want %v", sent, want)
	}
	clock.Advance(noticeEvery)
	n.changed(ctx, "prod")
	if want := []string{"prod", "dev", "prod"}; !slices.Equal(sent, want) {
		t.Fatalf("a second later: sent %v, want %v", sent, want)
	}
	n.changed(ctx, "prod")
	if err := n.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{"prod", "dev", "prod", "prod"}; !slices.Equal(sent, want) {
		t.Fatalf("after flush: sent %v, want %v (prod's last receipt, not dev's already told one)", sent, want)
	}
	if err := n.flush(ctx); err != nil || len(sent) != 4 {
		t.Fatalf("a second flush: sent %v, %v; want nothing more", sent, err)
	}
	fail = true
	clock.Advance(noticeEvery)
	n.changed(ctx, "dev")
	if err := n.flush(ctx); err == nil {
		t.Fatal("flush with the database gone: no error")
	}
	fail = false
	if err := n.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if want := []string{"prod", "dev", "prod", "prod", "dev"}; !slices.Equal(sent, want) {
		t.Fatalf("after the database came back: sent %v, want %v (the failed notification sent)", sent, want)
	}
}
