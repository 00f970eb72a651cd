package configserver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

// racingStore is the env's real store, except that its next Current for
// the watched identity returns what was current and then, before the
// handler can subscribe, lets the pointer move (committed and made current
// in the real store): a move that lands between the handler's read and its
// subscription.
type racingStore struct {
	configserver.Store
	notifier configserver.Notifier

	mu     sync.Mutex
	armed  bool
	during func()
}

func (s *racingStore) Subscribe(id bundle.Identity, fn func()) func() bool {
	return s.notifier.Subscribe(id, fn)
}

func (s *racingStore) Current(ctx context.Context, id bundle.Identity) (*configserver.Delivery, error) {
	d, err := s.Store.Current(ctx, id)
	s.mu.Lock()
	during := s.during
	if !s.armed {
		during = nil
	}
	s.armed = false
	s.mu.Unlock()
	if during != nil {
		during()
	}
	return d, err
}

// TestHeldOverHTTP2MissesNoMove: a watch held on the handler's goroutine
// (HTTP/2, where the connection cannot be taken over — every TLS client that
// offers h2) whose pointer moves between the handler's read and its change
// subscription is answered 200 with the move at once. It subscribed, then
// compared with what it had read before subscribing, and so waited out its
// whole wait and answered 304 with the snapshot no longer current.
func TestHeldOverHTTP2MissesNoMove(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := bundle.Identity{Host: "h2race.example", ServiceID: "gw", EnvTag: "prod"}
	a := e.seed.publish(t, id, "gateway", 1, []byte("h2 race body 1\n"))
	b := e.seed.publish(t, id, "gateway", 2, []byte("h2 race body 2\n"))
	e.seed.move(t, a)
	waitAnswer(t, e, id, http.StatusOK, a.ID)

	rs := &racingStore{Store: e.store, notifier: e.store}
	rs.during = func() {
		e.seed.move(t, b)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if d, err := e.store.Current(context.Background(), id); err == nil && d.SnapshotID == b.ID {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Error("the move was not made current within 5s")
	}
	srv := httptest.NewUnstartedServer(configserver.NewHandler(rs, configserver.Options{Verifier: e.verifier, MaxWait: time.Minute}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	rs.mu.Lock()
	rs.armed = true
	rs.mu.Unlock()
	ans := recvWatch(t, startWatch(srv.Client(), srv.URL, id, e.token(t, id, "gateway"), `"`+a.ArtifactDigest+`"`, "6s"), 15*time.Second)
	if ans.header == nil || ans.status != http.StatusOK || ans.snapshot != b.ID || ans.took > 4*time.Second {
		t.Fatalf("a move between the read and the subscription: got %d %s after %s, want 200 %s at once", ans.status, ans.snapshot, ans.took, b.ID)
	}
}
