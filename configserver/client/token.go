package client

import (
	"context"
	"errors"
	"time"
)

// MaxTokenRetryDelay bounds WaitToken's back-off: a token provisioned after
// the runtime started is picked up within about this long of appearing.
const MaxTokenRetryDelay = 5 * time.Second

// WaitToken waits until Options.TokenSource yields a token, for a runtime
// started before its token is provisioned (Kubernetes projects a service
// account token a moment after the containers start; a Vault agent writes
// its sink later): it asks the source again with back-off, from
// MinRetryDelay doubling up to MaxTokenRetryDelay with ±20% jitter, for as
// long as the source's error matches ErrTokenMissing. missing, when not
// nil, is called once, with that error, when the first try finds no token;
// the error names the file, never a token. WaitToken sends no request and
// changes nothing: the current snapshot (a restored last-known-good) stays
// current, or the runtime stays failed closed, until a load. It returns nil
// once the source yields a token or fails otherwise (the load that follows
// reports it), and when the current snapshot's lease (plus skew) ends by
// the client's clock (the load that follows fails closed: a wait never
// outlasts a lease); at once when there is no TokenSource, and ctx's error
// when ctx ends first.
func (c *Client) WaitToken(ctx context.Context, missing func(error)) error {
	if c.opts.TokenSource == nil {
		return nil
	}
	for retries := 0; ; retries++ {
		_, err := c.opts.TokenSource(ctx)
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if !errors.Is(err, ErrTokenMissing) {
			return nil
		}
		left := c.untilEnd()
		if c.current() != nil && left == 0 {
			return nil // the lease ended: the next load fails closed
		}
		if retries == 0 && missing != nil {
			missing(err)
		}
		delay := backoff(MinRetryDelay, MaxTokenRetryDelay, retries)
		if left > 0 && left < delay {
			delay = left
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
