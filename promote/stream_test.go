package promote_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

// watchedStore is the real store, watched: what StoreArtifacts got and
// what the recording got.
type watchedStore struct {
	*promoter.Store
	mu       sync.Mutex
	stored   map[string][]byte // artifact digest -> bytes handed to StoreArtifacts
	calls    int
	recorded []promoter.ReleaseInput
}

func (w *watchedStore) StoreArtifacts(ctx context.Context, arts []promoter.Artifact) error {
	w.mu.Lock()
	w.calls++
	for _, a := range arts {
		w.stored[a.Digest] = append([]byte(nil), a.Bytes...)
	}
	w.mu.Unlock()
	return w.Store.StoreArtifacts(ctx, arts)
}

func (w *watchedStore) RecordAndActivate(ctx context.Context, in promoter.ReleaseInput) (*promoter.ActivationResult, error) {
	w.recorded = append(w.recorded, in)
	return w.Store.RecordAndActivate(ctx, in)
}

// inlineStore is the real store seen through Recorder, the release reader
// and the status reader only: it cannot take artifacts ahead of the
// recording.
type inlineStore struct {
	s        *promoter.Store
	recorded []promoter.ReleaseInput
}

func (i *inlineStore) RecordAndActivate(ctx context.Context, in promoter.ReleaseInput) (*promoter.ActivationResult, error) {
	i.recorded = append(i.recorded, in)
	return i.s.RecordAndActivate(ctx, in)
}

func (i *inlineStore) ReleaseManifest(ctx context.Context, env string, version int64) ([]byte, error) {
	return i.s.ReleaseManifest(ctx, env, version)
}

func (i *inlineStore) Status(ctx context.Context, env string) (*promoter.Status, error) {
	return i.s.Status(ctx, env)
}

// TestPromoteStoresArtifactsAheadOfTheRecording: a promotion hands the
// store every target's bytes ahead of the recording (StoreArtifacts,
// exact bytes under their digests), and the recording carries no bytes
// (ArtifactsStored); the store serves the exact artifacts the registry
// holds. Re-running the promotion stores nothing (the head is no longer
// the release's base) and replays. A store that cannot take artifacts
// ahead gets every target's bytes in the recording instead. The promotion
// logs its publication's progress.
func TestPromoteStoresArtifactsAheadOfTheRecording(t *testing.T) {
	h := promotertest.New(t)
	w := &watchedStore{Store: h.Store, stored: map[string][]byte{}}
	o := h.Options(h.Repo.R1)
	o.Store = w
	var logged bytes.Buffer
	o.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	res, err := h.Promote(t, o)
	if err != nil {
		t.Fatal(err)
	}
	// Progress: the last record counts every artifact, the release's too.
	n := len(h.Repo.Snapshots[h.Repo.R1]) + 1
	if want := fmt.Sprintf("msg=publishing artifacts=%d of=%d pushed=%d", n, n, n); !strings.Contains(logged.String(), want) {
		t.Errorf("promotion log has no %q:\n%s", want, logged.String())
	}
	if len(w.recorded) != 1 {
		t.Fatalf("recorded %d times, want once", len(w.recorded))
	}
	in := w.recorded[0]
	if !in.ArtifactsStored || len(in.Targets) != len(h.Repo.Snapshots[h.Repo.R1]) {
		t.Fatalf("recording: artifactsStored %v, %d targets; want stored ahead, %d targets", in.ArtifactsStored, len(in.Targets), len(h.Repo.Snapshots[h.Repo.R1]))
	}
	if w.calls == 0 {
		t.Fatal("StoreArtifacts was not called")
	}
	for _, tg := range in.Targets {
		if tg.Values != nil {
			t.Errorf("target %s/%s carries %d bytes into the recording, want none", tg.Host, tg.ServiceID, len(tg.Values))
		}
		b, ok := w.stored[tg.ArtifactDigest]
		if !ok || digest.FromBytes(b).String() != tg.ArtifactDigest {
			t.Fatalf("target %s/%s: artifact %s not handed to StoreArtifacts with its bytes", tg.Host, tg.ServiceID, tg.ArtifactDigest)
		}
		var served []byte
		if err := h.Pool.QueryRow(t.Context(), `SELECT a.bytes FROM configpub.current_pointer p
			JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
			JOIN configpub.artifact a ON a.artifact_digest = s.artifact_digest
			WHERE p.host = $1 AND p.service_id = $2`, tg.Host, tg.ServiceID).Scan(&served); err != nil {
			t.Fatal(err)
		}
		pulled, err := h.Client.Pull(t.Context(), tg.OCIReference)
		if err != nil {
			t.Fatalf("pull %s: %v", tg.OCIReference, err)
		}
		if string(served) != string(b) || string(pulled.Content) != string(b) {
			t.Errorf("target %s/%s: the store serves %d bytes, the registry holds %d, the stream stored %d; want the same bytes", tg.Host, tg.ServiceID, len(served), len(pulled.Content), len(b))
		}
	}
	if res.Activation == nil || res.Activation.Moved != len(in.Targets) {
		t.Fatalf("activation %+v, want every target moved", res.Activation)
	}

	// A re-run stores nothing ahead and replays.
	w.calls = 0
	again, err := h.Promote(t, o)
	if err != nil || again.Activation == nil || !again.Activation.Replayed {
		t.Fatalf("re-run: %+v, %v; want a replay", again, err)
	}
	if w.calls != 0 {
		t.Errorf("the re-run stored artifacts ahead %d times, want none (the head is past the base)", w.calls)
	}

	// A store without StoreArtifacts: the bytes go with the recording.
	i := &inlineStore{s: h.Store}
	o2 := h.Options(h.Repo.R2)
	o2.Store = i
	if _, err := h.Promote(t, o2); err != nil {
		t.Fatal(err)
	}
	if len(i.recorded) != 1 || i.recorded[0].ArtifactsStored {
		t.Fatalf("inline recording: %d recordings, artifactsStored %v; want one with the bytes", len(i.recorded), len(i.recorded) == 1 && i.recorded[0].ArtifactsStored)
	}
	for _, tg := range i.recorded[0].Targets {
		if digest.FromBytes(tg.Values).String() != tg.ArtifactDigest {
			t.Errorf("inline target %s/%s: %d bytes that do not hash to %s", tg.Host, tg.ServiceID, len(tg.Values), tg.ArtifactDigest)
		}
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R2]) || s.Current != 2 {
		t.Fatalf("got pointers %v current %d, want release 2", s.Pointers, s.Current)
	}
}
