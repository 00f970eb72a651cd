package main

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"

	"github.com/configpub/configpub/configserver/client"
)

// outState is what the sidecar's --out holds, as far as it wrote it: the
// runtime reads that file, so the status endpoint reports it as running,
// not the client's current snapshot, which --out may not have received.
type outState struct {
	mu      sync.Mutex
	written *client.Snapshot // the snapshot whose bytes --out holds; nil when none or unknown
	failed  *client.Evidence // the last failure to write the client's current snapshot; nil once written
	// failures counts the writes of --out that failed (OUT_UNWRITABLE),
	// for /metrics.
	failures uint64
	// changes counts the times --out was written with other bytes or
	// removed.
	changes uint64
}

// changeCount returns how many times --out was written with other bytes or
// removed.
func (o *outState) changeCount() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changes
}

func (o *outState) changed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changes++
}

// failedWrites returns how many writes of --out failed.
func (o *outState) failedWrites() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failures
}

// running returns what the runtime runs and the last failure to write --out
// (client.StatusOptions.Running).
func (o *outState) running() (*client.Snapshot, *client.Evidence) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written, o.failed
}

func (o *outState) wrote(s *client.Snapshot) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.written, o.failed = s, nil
}

func (o *outState) removed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.written, o.failed = nil, nil
}

func (o *outState) writeFailed(ev *client.Evidence) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed = ev
	o.failures++
}

// outUnwritable is ev as the sidecar reports it when --out could not be
// written: REJECTED OUT_UNWRITABLE naming the error, with the snapshot the
// runtime still runs (what --out held before) as current and as the
// last-known-good: what the runtime falls back on is what --out holds, not
// what the client persisted in its cache. With nothing in --out the runtime
// fails closed, as the status endpoint says.
func outUnwritable(ev *client.Evidence, running *client.Snapshot, err error) *client.Evidence {
	e := *ev
	e.Outcome, e.Reason, e.Field, e.Detail = client.OutcomeRejected, client.ReasonOutUnwritable, "out", err.Error()
	e.CurrentSnapshotID, e.LastKnownGoodSnapshotID, e.FailedClosed = "", "", true
	if running != nil {
		e.CurrentSnapshotID, e.LastKnownGoodSnapshotID, e.FailedClosed = running.SnapshotID, running.SnapshotID, ev.FailedClosed
	}
	return &e
}

// outWritten is ev as the sidecar reports it when a load the client found
// unchanged wrote --out after all (an earlier write failed, here or in an
// earlier run): the runtime applies the snapshot now.
func outWritten(ev *client.Evidence, s *client.Snapshot) *client.Evidence {
	e := *ev
	e.Outcome, e.Reason, e.Field, e.Detail = client.OutcomeApplied, client.ReasonNewSnapshot, "", ""
	e.SnapshotID, e.PublicationID, e.ReleaseVersion = s.SnapshotID, s.PublicationID, s.Envelope.ReleaseVersion
	e.ArtifactDigest, e.ContentDigest, e.PolicyDigest = s.ArtifactDigest, s.ContentDigest, s.PolicyDigest
	e.CurrentSnapshotID, e.LastKnownGoodSnapshotID, e.FailedClosed = s.SnapshotID, s.SnapshotID, false
	if s.Manifest != nil {
		e.Sequence, e.LeaseExpiresAt = s.Manifest.Sequence, s.Manifest.ExpiresAt
	}
	return &e
}

// outWriteFault is a fault seam for tests: a failure of --out's write that
// cannot be caused for real here (ENOSPC; a read-only file system, which
// root ignores). When set it is called with the path before each write of
// --out, and its error fails the write.
var outWriteFault atomic.Pointer[func(path string) error]

// writeIfChanged replaces path atomically unless it already holds b, and
// reports whether it did.
func writeIfChanged(path string, b []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return false, nil
	}
	if f := outWriteFault.Load(); f != nil {
		if err := (*f)(path); err != nil {
			return true, err
		}
	}
	return true, client.WriteFile(path, b, 0o644)
}
