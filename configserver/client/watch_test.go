package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/simclock"
)

func TestWatchPollsAndEndsWithContext(t *testing.T) {
	w := newWorld(t)
	w.srv.set(w.build(w.spec(1)), nil)
	c := w.client()

	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var outcomes []client.Outcome
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, 20*time.Millisecond, func(ev *client.Evidence, err error) {
			mu.Lock()
			defer mu.Unlock()
			outcomes = append(outcomes, ev.Outcome)
			if len(outcomes) == 3 {
				cancel()
			}
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch: got %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not end with its context")
	}
	mu.Lock()
	defer mu.Unlock()
	want := []client.Outcome{client.OutcomeApplied, client.OutcomeUnchanged, client.OutcomeUnchanged}
	if len(outcomes) != len(want) {
		t.Fatalf("outcomes: got %v, want %v", outcomes, want)
	}
	for i := range want {
		if outcomes[i] != want[i] {
			t.Fatalf("outcomes: got %v, want %v", outcomes, want)
		}
	}
}

func TestWatchBacksOffOnFailure(t *testing.T) {
	w := newWorld(t)
	w.srv.setRaw(func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusServiceUnavailable) })
	c := w.client()

	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	var mu sync.Mutex
	var times []time.Time
	err := c.Watch(ctx, 2*time.Second, func(ev *client.Evidence, err error) {
		mu.Lock()
		defer mu.Unlock()
		times = append(times, time.Now())
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Watch: got %v, want context.DeadlineExceeded", err)
	}
	mu.Lock()
	defer mu.Unlock()
	// Retries at ~0, 0.5s (±20%), then ~1s later: 2 or 3 calls in 1.2s,
	// never the 12+ a fixed 100ms loop would make, never just one.
	if len(times) < 2 || len(times) > 3 {
		t.Fatalf("calls in 1.2s with backoff from 500ms: got %d, want 2 or 3", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < 350*time.Millisecond {
		t.Fatalf("first retry after %s, want >= 400ms (500ms -20%%)", gap)
	}
}

func TestWatchRejectsNonPositiveInterval(t *testing.T) {
	w := newWorld(t)
	if err := w.client().Watch(context.Background(), 0, nil); err == nil {
		t.Fatal("Watch with interval 0: got nil, want an error")
	}
}

// realClock is the wall clock, for a test of Watch's own timers.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// TestWatchFailsClosedAtTheLeaseEnd: with the Config Server down, a
// watching runtime reports itself failed closed when its lease (plus skew)
// ends, not at its next load — a fetch sidecar kept --out up to
// an interval after its lease ended.
func TestWatchFailsClosedAtTheLeaseEnd(t *testing.T) {
	w := newWorld(t)
	w.clock = simclock.New(time.Now())
	s := w.spec(1)
	now := time.Now()
	s.issuedAt, s.activatedAt, s.leaseFrom = now.Add(-time.Minute), now.Add(-time.Minute), now.Add(-time.Minute)
	s.leaseTo = now.Add(3 * time.Second).Truncate(time.Second) // rfc() keeps whole seconds
	r1 := w.build(s)
	var served atomic.Int32
	w.srv.setRaw(func(rw http.ResponseWriter, r *http.Request) {
		if served.Add(1) > 1 {
			rw.WriteHeader(http.StatusServiceUnavailable) // the database is down
			return
		}
		for k, v := range r1.headers() {
			rw.Header()[k] = v
		}
		_, _ = rw.Write(r1.Values)
	})
	c := w.client(func(o *client.Options) { o.Clock, o.Skew = realClock{}, 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var failedAt time.Time
	_ = c.Watch(ctx, time.Minute, func(ev *client.Evidence, _ error) {
		if ev.FailedClosed && failedAt.IsZero() {
			failedAt = time.Now()
			cancel()
		}
	})
	if failedAt.IsZero() {
		t.Fatal("the runtime never reported failing closed")
	}
	if late := failedAt.Sub(s.leaseTo); late < 0 || late > 700*time.Millisecond {
		t.Fatalf("failed closed %s after the lease ended, want within 700ms (the next load was an interval away)", late)
	}
}

// TestWatchAsksAgainAtOnceOnlyAfterAHeld404: a 404 from a server that holds
// requests is asked again at once only when the server held it (about the
// whole wait: the identity had nothing to serve); one answered at once
// (a server that does not hold a 404) is backed off from as any failure,
// never a tight loop.
func TestWatchAsksAgainAtOnceOnlyAfterAHeld404(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(map[bool]string{false: "answered at once", true: "held"}[held], func(t *testing.T) {
			w := newWorld(t)
			w.srv.setRaw(func(rw http.ResponseWriter, r *http.Request) {
				rw.Header().Set(client.HeaderWatchMax, "300")
				if held {
					time.Sleep(300 * time.Millisecond) // the wait asked for: the interval
				}
				rw.WriteHeader(http.StatusNotFound)
			})
			c := w.client(func(o *client.Options) { o.Clock = realClock{} })
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			var mu sync.Mutex
			var times []time.Time
			_ = c.Watch(ctx, 300*time.Millisecond, func(ev *client.Evidence, err error) {
				mu.Lock()
				defer mu.Unlock()
				times = append(times, time.Now())
			})
			mu.Lock()
			defer mu.Unlock()
			if !held {
				// ~0, +0.3 s (min(500ms, interval) ±20%), then every ~0.3 s: 4 to 6.
				if len(times) < 3 || len(times) > 7 {
					t.Fatalf("404s answered at once: %d loads in 1.5 s, want a back-off (3 to 7)", len(times))
				}
				return
			}
			for i := 1; i < len(times); i++ {
				if gap := times[i].Sub(times[i-1]); gap > 450*time.Millisecond {
					t.Fatalf("held 404s: %s between two loads, want the next asked at once (~300 ms each)", gap)
				}
			}
			if len(times) < 3 {
				t.Fatalf("held 404s: %d loads in 1.5 s, want about 5", len(times))
			}
		})
	}
}
