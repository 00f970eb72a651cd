package readback

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/textlist"
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
// Options.Concurrency targets at once, and returns one Result per target
// read, in the order of targets (see Each, which it collects).
func Run(ctx context.Context, c *Collector, store *Store, targets []Target) ([]Result, error) {
	out := make([]Result, 0, len(targets))
	err := Each(ctx, c, store, targets, func(r *Result) error {
		out = append(out, *r)
		return nil
	})
	return out, err
}

// Each reads every target and records the receipts each status carries,
// Options.Concurrency targets at once, and calls fn with each target's
// Result in the order of targets as soon as it and those before it are
// done. It holds at most a few Results per reader, however many targets
// there are; fn must not keep r. A target that could not be read or whose
// receipts do not match the store is reported in its Result and counted
// in the error, and the others are still read. When ctx ends, no further
// target is started: the Results of those started are still passed, and
// the error says how many were read. An error from fn stops the readback
// and is returned as it is.
func Each(ctx context.Context, c *Collector, store *Store, targets []Target, fn func(r *Result) error) error {
	type job struct {
		i   int
		out chan Result
	}
	readers := min(c.opts.Concurrency, len(targets))
	jobs := make(chan job)
	// order holds the result slots in the order of targets; its capacity
	// bounds how far reading runs ahead of fn.
	order := make(chan chan Result, 4*readers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.out <- readOne(ctx, c, store, targets[j.i])
			}
		}()
	}
	var stopped error // ctx's error when it ended the dispatch; read after order is closed
	go func() {
		defer close(order)
		defer close(jobs)
		for i := range targets {
			if err := ctx.Err(); err != nil {
				stopped = err
				return
			}
			out := make(chan Result, 1)
			select {
			case jobs <- job{i, out}:
			case <-ctx.Done():
				stopped = ctx.Err()
				return
			case <-stop:
				return
			}
			select {
			case order <- out:
			case <-stop:
				return
			}
		}
	}()
	read := 0
	failed := textlist.First{N: failedNamed}
	var fnErr error
	for out := range order {
		r := <-out
		read++
		if r.Error != "" {
			failed.Add(r.Target.Identity().String())
		}
		if err := fn(&r); err != nil {
			fnErr = err
			close(stop)
			break
		}
	}
	for range order { // after a failed fn: let the dispatcher see stop
	}
	wg.Wait()
	// The console's notifications are best effort: the receipts are
	// recorded whether or not a live page learns of them now.
	if store != nil {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = store.Flush(fctx)
		cancel()
	}
	switch {
	case fnErr != nil:
		return fnErr
	case stopped != nil:
		return fmt.Errorf("readback: %d of %d targets read: %w", read, len(targets), stopped)
	case failed.Count > 0:
		return fmt.Errorf("readback: %d of %d targets not recorded: %s", failed.Count, len(targets), &failed)
	}
	return nil
}

// failedNamed is how many of the targets not recorded Each's error names
// (their Results say why; the error counts them all).
const failedNamed = 5

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
