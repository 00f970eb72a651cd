package promote_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/registry"
)

// watchedRegistry is the real registry client, watched: how many
// verifications started while the publication was still running and how
// many after it returned.
type watchedRegistry struct {
	*registry.Client
	mu                   sync.Mutex
	publishing           bool
	during, after        int
	verifiedWhilePublish chan struct{} // closed at the first verification during the publication
}

func (w *watchedRegistry) PublishSeq(ctx context.Context, req registry.PublishRequest, arts iter.Seq2[registry.Artifact, error]) (*registry.Summary, error) {
	w.mu.Lock()
	w.publishing = true
	w.mu.Unlock()
	sum, err := w.Client.PublishSeq(ctx, req, arts)
	if err == nil {
		// The publication is not over until this returns: give a
		// verification queued as its artifacts completed time to start
		// (one that only starts after the publication never does).
		select {
		case <-w.verifiedWhilePublish:
		case <-time.After(10 * time.Second):
		}
	}
	w.mu.Lock()
	w.publishing = false
	w.mu.Unlock()
	return sum, err
}

func (w *watchedRegistry) Verify(ctx context.Context, ref string, o registry.VerifyOptions) (*registry.Verified, error) {
	w.mu.Lock()
	if w.publishing {
		if w.during == 0 {
			close(w.verifiedWhilePublish)
		}
		w.during++
	} else {
		w.after++
	}
	w.mu.Unlock()
	return w.Client.Verify(ctx, ref, o)
}

// TestPromoteVerifiesWhilePublishing: every published artifact is verified
// once, each as soon as it is published rather than in a second pass after
// the publication (at 100,000 targets that pass re-read the whole release
// from the registry's disk).
func TestPromoteVerifiesWhilePublishing(t *testing.T) {
	h := promotertest.New(t)
	w := &watchedRegistry{Client: h.Client, verifiedWhilePublish: make(chan struct{})}
	o := h.Options(h.Repo.R1)
	o.Registry = w
	if _, err := h.Promote(t, o); err != nil {
		t.Fatal(err)
	}
	n := len(h.Repo.Snapshots[h.Repo.R1]) + 1 // the targets' artifacts and the release's
	if w.during+w.after != n || w.during == 0 {
		t.Fatalf("verified %d artifacts while publishing, %d after; want all %d, starting while publishing", w.during, w.after, n)
	}
}

// TestPromoteStopsWhenVerificationFails: artifacts that do not verify
// against the trusted keys stop the promotion with the verification's
// error, and nothing is recorded or activated.
func TestPromoteStopsWhenVerificationFails(t *testing.T) {
	h := promotertest.New(t)
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := signing.NewTrustedKey(&other.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(h.Repo.R1)
	o.TrustedKeys = []signing.TrustedKey{k}
	_, err = h.Promote(t, o)
	var ve *registry.VerificationError
	if !errors.As(err, &ve) {
		t.Fatalf("promote with artifacts signed by an untrusted key: %v, want a verification error", err)
	}
	s := promotertest.ReadState(t, h.Pool)
	if s.Current != 0 || len(s.Pointers) != 0 || s.Counts["config_release"] != 0 {
		t.Fatalf("after a failed verification: release %d current, %d pointers, %d releases; want nothing recorded", s.Current, len(s.Pointers), s.Counts["config_release"])
	}
}
