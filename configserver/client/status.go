package client

import (
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
)

// statusState is what the runtime remembers for its status endpoint and
// metrics, updated at the end of every load. It has its own lock so that
// reading the status never waits for a load in flight.
type statusState struct {
	mu           sync.Mutex
	lkg          *bundle.SnapshotState
	lastRejected *bundle.SnapshotState
	candidate    *bundle.SnapshotState
	lastLoad     *bundle.LoadState
	loads        map[[2]string]uint64 // (outcome, reason) -> count
}

// record notes a finished load: ev is its evidence, cur what is current
// afterwards (nil when none) and lkgID the last-known-good's snapshot id.
func (s *statusState) record(ev *Evidence, cur *Snapshot, lkgID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := ev.ObservedAt.UTC().Format(time.RFC3339Nano)
	s.lastLoad = &bundle.LoadState{Outcome: string(ev.Outcome), Reason: string(ev.Reason), At: at}
	if s.loads == nil {
		s.loads = map[[2]string]uint64{}
	}
	s.loads[[2]string{string(ev.Outcome), string(ev.Reason)}]++
	if ev.Outcome == OutcomeRejected {
		s.lastRejected = evidenceState(ev, bundle.ResultRejected, at)
	}
	if cur != nil && lkgID != "" && cur.SnapshotID == lkgID {
		s.lkg = snapshotState(cur)
	}
}

func evidenceState(ev *Evidence, result, at string) *bundle.SnapshotState {
	st := &bundle.SnapshotState{
		SnapshotID: ev.SnapshotID, PublicationID: ev.PublicationID, ReleaseVersion: ev.ReleaseVersion, Sequence: ev.Sequence,
		ArtifactDigest: ev.ArtifactDigest, ContentDigest: ev.ContentDigest, PolicyDigest: ev.PolicyDigest,
		LoadedAt: at, ExpiresAt: ev.LeaseExpiresAt, Result: result, Reason: string(ev.Reason),
	}
	if !isUUID(st.SnapshotID) {
		st.SnapshotID = "" // not a signed id: never reported as one
	}
	return st
}

func snapshotState(s *Snapshot) *bundle.SnapshotState {
	st := &bundle.SnapshotState{
		SnapshotID: s.SnapshotID, PublicationID: s.PublicationID, ReleaseVersion: s.Envelope.ReleaseVersion,
		ArtifactDigest: s.ArtifactDigest, ContentDigest: s.ContentDigest, PolicyDigest: s.PolicyDigest,
		LoadedAt: s.VerifiedAt.UTC().Format(time.RFC3339Nano), ExpiresAt: s.ExpiresAt.UTC().Format(time.RFC3339),
		Result: bundle.ResultApplied,
	}
	if s.Manifest != nil {
		st.Sequence = s.Manifest.Sequence
	}
	return st
}

// Status returns the runtime's status: its identity, the current snapshot
// (nil when none is in force), the last-known-good, the last rejected
// snapshot, the staged candidate it holds, its last load and whether it
// fails closed. It never blocks on a load in flight.
func (c *Client) Status() *bundle.RuntimeStatus {
	id := c.opts.Identity
	now := c.opts.Clock.Now()
	st := &bundle.RuntimeStatus{
		Type: bundle.RuntimeStatusType, Host: id.Host, ServiceID: id.ServiceID, EnvTag: id.EnvTag,
		Audience: c.opts.Audience, ObservedAt: now.UTC().Format(time.RFC3339Nano),
	}
	if snap, err := c.Current(); err == nil {
		st.Current = snapshotState(snap)
	} else {
		st.FailedClosed = true
	}
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	st.LastKnownGood = clone(c.st.lkg)
	st.LastRejected = clone(c.st.lastRejected)
	st.Candidate = clone(c.st.candidate)
	if c.st.lastLoad != nil {
		l := *c.st.lastLoad
		st.LastLoad = &l
	}
	return st
}

// RunningStatus is Status as reported by a runtime that applies the
// client's current snapshot itself and can fail to (the fetch sidecar
// writes it to the file its runtime reads; StatusOptions.Running): running
// (nil when none) is shown as current, unless the client fails closed, and
// as the last-known-good — what the runtime can read, whatever the client
// holds or persisted in its cache — and failed, when not nil, as the last
// rejected snapshot and the last load (REJECTED OUT_UNWRITABLE). A runtime
// that runs nothing (running nil: the file was never written, or removed)
// is reported failed closed even while the client holds a verified
// snapshot it could not hand on: the workload has no configuration. A nil
// running func is Status.
func (c *Client) RunningStatus(running func() (running *Snapshot, failed *Evidence)) *bundle.RuntimeStatus {
	st := c.Status()
	if running == nil {
		return st
	}
	run, failed := running()
	st.Current, st.LastKnownGood = nil, nil
	if run != nil {
		st.LastKnownGood = snapshotState(run)
		if !st.FailedClosed {
			st.Current = snapshotState(run)
		}
	} else {
		st.FailedClosed = true
	}
	if failed != nil {
		at := failed.ObservedAt.UTC().Format(time.RFC3339Nano)
		st.LastRejected = evidenceState(failed, bundle.ResultRejected, at)
		st.LastLoad = &bundle.LoadState{Outcome: string(failed.Outcome), Reason: string(failed.Reason), At: at}
	}
	return st
}

// LoadCounts returns how many loads ended with each (outcome, reason) since
// the Client was created.
func (c *Client) LoadCounts() map[[2]string]uint64 {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	out := make(map[[2]string]uint64, len(c.st.loads))
	for k, v := range c.st.loads {
		out[k] = v
	}
	return out
}

func clone(s *bundle.SnapshotState) *bundle.SnapshotState {
	if s == nil {
		return nil
	}
	x := *s
	return &x
}
