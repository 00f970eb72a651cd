package promoter

import (
	"context"
	"fmt"
	"time"
)

// DefaultObservationMinAge is how long superseded APPLIED observations are
// kept unless told otherwise.
const DefaultObservationMinAge = 30 * 24 * time.Hour

// ObservationCollectOptions says which superseded observations
// CollectObservations removes.
type ObservationCollectOptions struct {
	// MinAge: only observations reported at least this long ago (by the
	// store's clock) are removed. 0 = DefaultObservationMinAge; negative
	// is ErrInvalid.
	MinAge time.Duration
	// Batch is how many identities one statement goes through (each
	// statement commits on its own). 0 = 1,000.
	Batch int
	// DryRun: count what would be removed; remove nothing.
	DryRun bool
}

// ObservationCollection is what CollectObservations removed (with DryRun,
// would remove).
type ObservationCollection struct {
	Observations int64
	Bytes        int64
	// ReportedBefore is the cutoff: every superseded observation reported
	// before it was removed.
	ReportedBefore time.Time
	// Oldest and Newest are the report times of the observations removed
	// (zero when none).
	Oldest, Newest time.Time
}

// CollectObservations removes the APPLIED observations — runtimes' own
// reports of a load, one per runtime per new snapshot and per renewed
// lease — reported more than opts.MinAge ago that a later observation of
// the same identity supersedes. Without collection they grow with the
// number of runtimes times the number of lease renewals, for ever, while
// nothing reads them: states, acknowledgements, the health gate and
// two-phase activation read receipts, and status shows the last
// observation. Receipts, REJECTED observations and the newest observation
// of every identity are never removed. Each statement goes through
// opts.Batch identities and commits on its own; each one that removed
// anything leaves a summary row in configpub.collected_observations
// (cutoff, identities, observations, bytes, oldest and newest report
// times, when and by whom).
func (s *Store) CollectObservations(ctx context.Context, opts ObservationCollectOptions) (ObservationCollection, error) {
	if opts.MinAge < 0 {
		return ObservationCollection{}, fmt.Errorf("collect observations: minimum age %s is negative: %w", opts.MinAge, ErrInvalid)
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultObservationMinAge
	}
	c := ObservationCollection{ReportedBefore: s.now().Add(-opts.MinAge)}
	got, err := s.collectByIdentity(ctx, identityCollection{what: "observations", function: "collect_observations",
		view: "superseded_observation", at: "reported_at"}, c.ReportedBefore, opts.Batch, opts.DryRun)
	c.Observations, c.Bytes, c.Oldest, c.Newest = got.rows, got.bytes, got.oldest, got.newest
	return c, err
}

// DefaultReceiptMinAge is how long repeated APPLIED receipts are kept
// unless told otherwise.
const DefaultReceiptMinAge = 30 * 24 * time.Hour

// ReceiptCollection is what CollectReceipts removed (with DryRun, would
// remove).
type ReceiptCollection struct {
	Receipts int64
	Bytes    int64
	// ReportedBefore is the cutoff: every repeated receipt reported before
	// it was removed.
	ReportedBefore time.Time
	// Oldest and Newest are the report times of the receipts removed (zero
	// when none).
	Oldest, Newest time.Time
}

// CollectReceipts removes the current-phase APPLIED receipts reported more
// than opts.MinAge ago (0 = DefaultReceiptMinAge) that repeat a state:
// a receipt of the same snapshot and running snapshot of the same identity
// precedes them with no pointer move in between, and another follows them.
// A readback after every lease renewal records one such receipt per
// runtime per renewal (a renewed lease is a new load). Every reader's
// answer stays the same: the first receipt of a state after a move
// (acknowledgements, applied times), the latest (what runs, states, the
// health gate), rejections and candidate-phase receipts are never removed.
// Batches and summaries (configpub.collected_receipts) are as in
// CollectObservations, whose options it takes.
func (s *Store) CollectReceipts(ctx context.Context, opts ObservationCollectOptions) (ReceiptCollection, error) {
	if opts.MinAge < 0 {
		return ReceiptCollection{}, fmt.Errorf("collect receipts: minimum age %s is negative: %w", opts.MinAge, ErrInvalid)
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultReceiptMinAge
	}
	c := ReceiptCollection{ReportedBefore: s.now().Add(-opts.MinAge)}
	got, err := s.collectByIdentity(ctx, identityCollection{what: "receipts", function: "collect_receipts",
		view: "superseded_receipt", at: "reported_at"}, c.ReportedBefore, opts.Batch, opts.DryRun)
	c.Receipts, c.Bytes, c.Oldest, c.Newest = got.rows, got.bytes, got.oldest, got.newest
	return c, err
}
