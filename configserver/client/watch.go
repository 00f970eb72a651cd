package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Backoff bounds of Watch after a failed load: the first retry waits
// min(interval, MinRetryDelay)·[0.8, 1.2], doubling per failure up to the
// polling interval.
const MinRetryDelay = 500 * time.Millisecond

// Watch keeps the configuration current until ctx ends. Each request asks
// the Config Server to hold it until the identity's pointer moves (GET
// /configs?wait=, with If-None-Match), for at most the interval, the
// server's bound (X-Config-Watch-Max), the time left before the current
// snapshot's refreshAfter and three quarters of the HTTP client's timeout.
// A server that answers with X-Config-Watch-Max is asked again at once, so
// a pointer move reaches the runtime about as fast as the server learns of
// it. A server that does not (an older one, or a proxy that drops the
// parameter) is polled as OPA's bundle downloader does: after a successful
// load Watch waits the interval with ±10% jitter (never past refreshAfter).
// After a failed load it backs off exponentially with ±20% jitter, from
// MinRetryDelay up to the interval, and resets on success — except after a
// 404 or 410 the server held (the identity had nothing to serve for the
// whole wait): it asks again at once, so that the move that ends it is
// answered as it commits.
//
// Once the current lease's refreshAfter has passed on the client's clock
// (renewals stopped, a renewer's clock behind, this clock ahead), a request
// asks without If-None-Match, so that the answer brings the newest manifest
// the server has; when it brings the same one back, Watch goes back to held
// conditional requests (a renewal still answers them at once), and asks
// unconditionally again only once half an interval has passed since: at
// most about one full answer per interval, not one per request. fn (which may be
// nil) receives every load's evidence and error; it runs on Watch's
// goroutine. No wait outlasts the current snapshot's lease (plus skew):
// the load at its end reports the runtime failed closed then, not an
// interval later. Watch returns ctx.Err().
//
// A held request does not block Load, Restore or ApplyOCI: the answer is
// verified under the client's lock once it arrives, and discarded for a
// fresh load when another load changed the current snapshot meanwhile.
func (c *Client) Watch(ctx context.Context, interval time.Duration, fn func(*Evidence, error)) error {
	if interval <= 0 {
		return fmt.Errorf("watch: interval %s must be positive", interval)
	}
	retries := 0
	serverMax := time.Duration(0) // learned from X-Config-Watch-Max; 0 = unknown
	var lastFull time.Time        // when an unconditional request last had an answer
	for {
		started := time.Now()
		wait := c.watchWait(interval, serverMax)
		refresh := lastFull.IsZero() || started.Sub(lastFull) >= interval/2
		ev, advertised, unconditional, err := c.loadWaiting(ctx, wait, refresh)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fn != nil {
			fn(ev, err)
		}
		if advertised > 0 {
			serverMax = advertised
		}
		if unconditional && err == nil {
			lastFull = time.Now()
		}
		var delay time.Duration
		switch {
		case err != nil && advertised > 0 && nothingToServe(err) && time.Since(started) >= wait/2:
			// The server held the request while the identity had nothing
			// to serve (a revoked snapshot, a retirement, no release yet)
			// and answers so at the end of the wait: ask again at once,
			// so that the move that ends it (a rollback, a first release)
			// is answered as it commits, not a back-off later.
			retries = 0
		case err != nil:
			delay = backoff(min(MinRetryDelay, interval), interval, retries)
			retries++
		case advertised > 0:
			retries = 0
			// Held by the server: ask again at once, unless an unchanged
			// answer to a conditional request came back early (a server
			// shutting down answers every waiter together): then spread the
			// reconnects. An unconditional one is answered at once.
			if !unconditional && ev.Outcome == OutcomeUnchanged && time.Since(started) < wait/2 {
				delay = jitter(min(MinRetryDelay, interval), 0.5)
			}
		default:
			retries = 0
			delay = jitter(interval, 0.1)
			if s, cerr := c.Current(); cerr == nil {
				if until := s.RefreshAfter.Sub(c.opts.Clock.Now()); until > 0 && until < delay {
					delay = until
				}
			}
		}
		// Never wait past the current snapshot's end (its lease plus skew):
		// the load that follows it reports the runtime failed closed then,
		// not up to an interval (or a back-off) later.
		if until := c.untilEnd(); until > 0 && until < delay {
			delay = until
		}
		if delay <= 0 {
			continue
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-c.keysChanged:
			t.Stop() // the trusted keys changed: load under them now
		case <-t.C:
		}
	}
}

// watchWait is how long the next request asks the server to hold it.
func (c *Client) watchWait(interval, serverMax time.Duration) time.Duration {
	wait := interval
	if serverMax > 0 {
		wait = min(wait, serverMax)
	}
	if t := c.opts.HTTPClient.Timeout; t > 0 {
		wait = min(wait, t*3/4)
	}
	if s := c.current(); s != nil {
		if until := s.RefreshAfter.Sub(c.opts.Clock.Now()); until > 0 {
			wait = min(wait, until)
		}
	}
	if until := c.untilEnd(); until > 0 {
		wait = min(wait, until)
	}
	return max(wait, time.Millisecond)
}

// maxWatchMax is the largest X-Config-Watch-Max read (a 32-bit count of
// seconds); the bound only ever lowers a wait.
const maxWatchMax = math.MaxInt32 * time.Second

// watchMaxOf is the server's bound on a held request that h announces in
// X-Config-Watch-Max (decimal seconds), or 0 when it announces none or a
// value that is not decimal digits from 1 to maxWatchMax.
func watchMaxOf(h http.Header) time.Duration {
	v := h.Get(HeaderWatchMax)
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// untilEnd is the time left before the current snapshot's lease (plus
// skew) ends; 0 when there is none or it has ended.
func (c *Client) untilEnd() time.Duration {
	s := c.current()
	if s == nil {
		return 0
	}
	return max(s.ExpiresAt.Add(c.opts.Skew).Sub(c.opts.Clock.Now()), 0)
}

// loadWaiting is Load with wait=: the request is sent and held without the
// client's lock, and its answer handled under it. advertised is the
// server's X-Config-Watch-Max (0 when the answer did not carry it). Past
// the current lease's refreshAfter the request is unconditional only when
// refresh is true; unconditional reports whether it was.
func (c *Client) loadWaiting(ctx context.Context, wait time.Duration, refresh bool) (ev *Evidence, advertised time.Duration, unconditional bool, err error) {
	c.mu.Lock()
	c.restoreOnce(ctx)
	base := c.current()
	c.mu.Unlock()
	// A change of the trusted keys ends the held request: the answer it
	// waits for was asked under the old set, and a runtime that lost its
	// current snapshot with a removed key must not wait out the hold.
	hctx, cancel := context.WithCancel(ctx)
	defer cancel() // after the answer's body is read
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-c.keysChanged:
			cancel()
		case <-stop:
		}
	}()
	resp, unconditional, sendErr := c.send(hctx, base, c.opts.Clock.Now(), wait, refresh)
	close(stop)
	<-stopped // a change it took is seen below, not lost
	kicked := hctx.Err() != nil && ctx.Err() == nil

	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	ev = c.newEvidence(SourceServer, now)
	if kicked {
		if resp != nil {
			resp.Body.Close()
		}
		ev, err = c.finish(ev, c.fetch(ctx, now, ev)) // afresh, under the new keys
		return ev, 0, false, err
	}
	if sendErr != nil {
		ev, err = c.finish(ev, sendErr)
		return ev, 0, unconditional, err
	}
	defer resp.Body.Close()
	advertised = watchMaxOf(resp.Header)
	if err := c.ensureSeen(); err != nil {
		ev, err = c.finish(ev, err)
		return ev, advertised, unconditional, err
	}
	if c.current() != base {
		// Another load changed the snapshot while this request was held:
		// its answer was conditional on an older one. Ask afresh.
		ev, err = c.finish(ev, c.fetch(ctx, now, ev))
		return ev, advertised, false, err
	}
	ev, err = c.finish(ev, c.receive(ctx, resp, now, ev))
	return ev, advertised, unconditional, err
}

// nothingToServe reports whether err is the server's 404 or 410: the
// identity has no snapshot to serve.
func nothingToServe(err error) bool {
	var ue *UnavailableError
	return errors.As(err, &ue) && (ue.Status == http.StatusNotFound || ue.Status == http.StatusGone)
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
