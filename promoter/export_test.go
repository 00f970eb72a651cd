package promoter

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SetFaultInjector sets the test-only fault hook of opts: fi is called at
// every named step between statements (for example "activate:pointers",
// "commit") with the open transaction, and a non-nil error aborts the
// transaction there.
func SetFaultInjector(opts *Options, fi func(ctx context.Context, step string, tx pgx.Tx) error) {
	opts.faultInjector = fi
}

// SetArtifactBatchBytes sets how many bytes of artifacts one statement of
// a recording sends at most (test-only; the default is 16 MiB).
func SetArtifactBatchBytes(opts *Options, n int) { opts.artifactBatchBytes = n }

// SetSnapshotBatch sets how many snapshots one statement records.
func SetSnapshotBatch(opts *Options, n int) { opts.snapshotBatch = n }

// AllowSchemaBehind lets Open use a database not migrated as far as this
// binary needs, for a test of what a later migration does to data recorded
// before it.
func AllowSchemaBehind(opts *Options) { opts.schemaBehind = true }

// AsAnOlderBinary makes the store's activations and lease renewals skip
// the revocation lock, as a configpub built before it (the one still
// running during a rolling upgrade) does: a fake of the older binary,
// which a test cannot run against this package's store.
func AsAnOlderBinary(opts *Options) { opts.olderBinary = true }

// RecheckRejected runs, outside any activation, the query with which the
// activation of a STAGED two-phase release re-checks its candidates'
// receipts before it commits (rejectedCandidate), for activation command
// cmdID of envTag/version: the identity of a REJECTED candidate, or "".
func RecheckRejected(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, envTag string, version int64, cmdID string) (string, error) {
	r, err := rejectedCandidate(ctx, q, envTag, version, cmdID)
	if err != nil || r == nil {
		return "", err
	}
	return r.Identity, nil
}

// CandidateReceiptsSQL and ContradictedCandidateSQL are the statements of
// the readiness check ($1 environment, $2 release), for tests that compare
// them with the statements they replaced.
const (
	CandidateReceiptsSQL     = candidateReceiptsSQL
	ContradictedCandidateSQL = contradictedCandidateSQL
)
