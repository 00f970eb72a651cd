package readback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
)

// Result is what a readback of one target did.
type Result struct {
	Target Target                `json:"target"`
	Status *bundle.RuntimeStatus `json:"status,omitempty"`
	// Receipts are the receipts the status carried; Recorded counts those
	// that were new.
	Receipts []bundle.Receipt `json:"receipts"`
	Recorded int              `json:"recorded"`
	// Unknown lists rejections of snapshots the store does not hold for
	// the identity (a forged or misdirected response the runtime
	// refused): reported, not recorded.
	Unknown []string `json:"unknown,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// Run reads every target and records the receipts each status carries,
// Options.Concurrency targets at once. It returns one Result per target read,
// in the order of targets; a target that could not be read or whose
// receipts do not match the store is reported in its Result and counted in
// the error, and the others are still read. When ctx ends, no further
// target is started and Run returns the Results of those read, still in
// order, with the context's error.
func Run(ctx context.Context, c *Collector, store *Store, targets []Target) ([]Result, error) {
	out := make([]Result, len(targets))
	done := make([]bool, len(targets))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(c.opts.Concurrency, len(targets)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i] = readOne(ctx, c, store, targets[i])
				done[i] = true
			}
		}()
	}
	var stopped error
feed:
	for i := range targets {
		select {
		case <-ctx.Done():
			stopped = ctx.Err()
			break feed
		case next <- i:
		}
	}
	close(next)
	wg.Wait()

	failed, read := 0, 0
	for i := range out {
		if !done[i] {
			continue
		}
		if out[i].Error != "" {
			failed++
		}
		out[read] = out[i]
		read++
	}
	out = out[:read]
	if stopped != nil {
		return out, fmt.Errorf("readback: %d of %d targets read: %w", read, len(targets), stopped)
	}
	if failed > 0 {
		return out, fmt.Errorf("readback: %d of %d targets not recorded", failed, len(targets))
	}
	return out, nil
}

// readOne reads one target's status and records the receipts it carries.
func readOne(ctx context.Context, c *Collector, store *Store, t Target) Result {
	res := Result{Target: t, Receipts: []bundle.Receipt{}}
	st, err := c.Read(ctx, t)
	if err == nil {
		res.Status = st
		res.Receipts = st.Receipts(t.Endpoint)
		observed, _ := time.Parse(time.RFC3339Nano, st.ObservedAt)
		for _, r := range res.Receipts {
			added, rerr := store.Record(ctx, r, observed)
			if rerr != nil && r.Result == bundle.ResultRejected && errors.Is(rerr, ErrInvalidReceipt) {
				res.Unknown = append(res.Unknown, r.SnapshotID)
				continue
			}
			if rerr != nil {
				err = rerr
				break
			}
			if added {
				res.Recorded++
			}
		}
	}
	if err != nil {
		res.Error = err.Error()
	}
	return res
}
