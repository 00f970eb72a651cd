package configserver

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

// absentStore has no pointer for any identity.
type absentStore struct{ Changes }

func (*absentStore) Current(context.Context, bundle.Identity) (*Delivery, error) {
	return nil, ErrNotFound
}
func (*absentStore) Snapshot(context.Context, bundle.Identity, string) (*Delivery, error) {
	return nil, ErrNotFound
}
func (*absentStore) RecordEvidence(context.Context, *Evidence) error { return nil }
func (*absentStore) Ready(context.Context) error                     { return nil }

// TestParkedAnsweredBeforeItsTimerIsSet: a parked request is visible to
// EndWatches (a shutdown) and to endGone (another request of its identity
// over the limit) as soon as it is registered, before park has set its
// timer; answered in that moment, answer stopped a nil timer and the
// panic took the whole server down. Here the request is answered in
// exactly that state, then park's timer step finds it done.
func TestParkedAnsweredBeforeItsTimerIsSet(t *testing.T) {
	h := NewHandler(&absentStore{}, Options{MaxWait: time.Minute}).(*handler)
	id := bundle.Identity{Host: "h", ServiceID: "s", EnvTag: "e"}
	server, peer := net.Pipe()
	read := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(peer); read <- b }()
	if !h.hold(id) {
		t.Fatal("no slot")
	}
	p := &parked{h: h, conn: server, hdr: http.Header{}, r: &http.Request{Method: http.MethodGet, Header: http.Header{}},
		rl: &reqLog{start: time.Now()}, sw: &statusWriter{}, claims: &auth.Claims{}, id: id, firstErr: ErrNotFound}
	h.register(p)
	p.end("server shutting down") // EndWatches, before park sets the timer
	h.arm(p, time.Minute)         // park's next step
	if b := <-read; len(b) == 0 {
		t.Fatal("the parked request was not answered")
	}
	p.mu.Lock()
	armed := p.timer != nil
	p.mu.Unlock()
	if armed {
		t.Fatal("a timer was set for a request already answered")
	}
	if n := h.ParkedWatches(); n != 0 {
		t.Fatalf("ParkedWatches after the answer: %d, want 0", n)
	}
	h.parkedMu.Lock()
	defer h.parkedMu.Unlock()
	if len(h.parkedSet) != 0 || len(h.parkedBy) != 0 || h.holding[id] != 0 {
		t.Fatalf("state left behind: %d parked, %d identities, %d held", len(h.parkedSet), len(h.parkedBy), h.holding[id])
	}
}
