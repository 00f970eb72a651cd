package client_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/configpub/configpub/configserver/client"
)

// TestConcurrentLoadAndReaders runs under -race: loaders alternate the served
// release while readers check that every snapshot they see is whole (its
// bytes, envelope, manifest and namespace all belong to the same release).
func TestConcurrentLoadAndReaders(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	rels := make([]*release, 6)
	for i := range rels {
		rels[i] = w.build(w.spec(int64(i + 1)))
	}
	w.srv.set(rels[0], nil)
	mustLoad(t, c, client.OutcomeApplied)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var seen atomic.Int64
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				s, err := c.Current()
				if err != nil {
					t.Errorf("Current: %v", err)
					return
				}
				n := s.Envelope.ReleaseVersion
				want := rels[n-1]
				if s.SnapshotID != want.Manifest.SnapshotID || s.Manifest.ReleaseVersion != n ||
					s.ArtifactDigest != want.ArtifactDigest() || s.Namespace["release"] != n {
					t.Errorf("torn snapshot: envelope release %d, snapshot %s", n, s.SnapshotID)
					return
				}
				seen.Add(1)
			}
		}()
	}
	var lw sync.WaitGroup
	for l := 0; l < 3; l++ {
		lw.Add(1)
		go func(l int) {
			defer lw.Done()
			for i := 1; i < len(rels); i++ {
				w.srv.set(rels[i], nil)
				ev, _ := c.Load(context.Background())
				// Loaders race each other: one may fetch an older release
				// after another applied a newer one; that is a replay.
				ok := ev.Outcome == client.OutcomeApplied || ev.Outcome == client.OutcomeUnchanged ||
					ev.Outcome == client.OutcomeRejected && ev.Reason == client.ReasonSequenceRegression
				if !ok {
					t.Errorf("loader %d: got %s %s, want APPLIED, UNCHANGED or a refused replay", l, ev.Outcome, ev.Reason)
				}
			}
		}(l)
	}
	lw.Wait()
	cancel()
	wg.Wait()
	if seen.Load() == 0 {
		t.Fatal("readers saw no snapshot")
	}
	s, err := c.Current()
	if err != nil || s.Envelope.ReleaseVersion != int64(len(rels)) {
		t.Fatalf("final: got %v, want release %d", err, len(rels))
	}
}
