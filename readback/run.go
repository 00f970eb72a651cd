package readback

import (
	"context"
	"errors"
	"fmt"
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

// Run reads every target in turn and records the receipts each status
// carries. It returns one Result per target, in order; a target that could
// not be read or whose receipts do not match the store is reported in its
// Result and counted in the error, and the others are still read.
func Run(ctx context.Context, c *Collector, store *Store, targets []Target) ([]Result, error) {
	out := make([]Result, 0, len(targets))
	failed := 0
	for _, t := range targets {
		res := Result{Target: t, Receipts: []bundle.Receipt{}}
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("readback: %w", err)
		}
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
			failed++
		}
		out = append(out, res)
	}
	if failed > 0 {
		return out, fmt.Errorf("readback: %d of %d targets not recorded", failed, len(targets))
	}
	return out, nil
}
