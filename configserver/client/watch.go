package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Backoff bounds of Watch after a failed load: the first retry waits
// min(interval, MinRetryDelay)·[0.8, 1.2], doubling per failure up to the
// polling interval.
const MinRetryDelay = 500 * time.Millisecond

// Watch polls the Config Server until ctx ends, as OPA's bundle downloader
// does: after a successful load it waits the interval with ±10% jitter (never
// past the current snapshot's refreshAfter); after a failed one it backs off
// exponentially with ±20% jitter, from MinRetryDelay up to the interval, and
// resets on success. fn (which may be nil) receives every load's evidence and
// error; it runs on Watch's goroutine. Watch returns ctx.Err().
func (c *Client) Watch(ctx context.Context, interval time.Duration, fn func(*Evidence, error)) error {
	if interval <= 0 {
		return fmt.Errorf("watch: interval %s must be positive", interval)
	}
	retries := 0
	for {
		ev, err := c.Load(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fn != nil {
			fn(ev, err)
		}
		var delay time.Duration
		if err == nil {
			retries = 0
			delay = jitter(interval, 0.1)
			if s, cerr := c.Current(); cerr == nil {
				if until := s.RefreshAfter.Sub(c.opts.Clock.Now()); until > 0 && until < delay {
					delay = until
				}
			}
		} else {
			delay = backoff(min(MinRetryDelay, interval), interval, retries)
			retries++
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// backoff returns base·2^retries capped at max, with ±20% jitter.
func backoff(base, max time.Duration, retries int) time.Duration {
	d := base
	for i := 0; i < retries && d < max; i++ {
		d *= 2
	}
	return jitter(min(d, max), 0.2)
}

// jitter spreads d uniformly over d·[1-f, 1+f].
func jitter(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * (1 - f + 2*f*rand.Float64()))
}
