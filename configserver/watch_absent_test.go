package configserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/pointernote"
)

// TestWatchHeldAfterARevocation: once the current snapshot of an identity
// is revoked, a watch request (404: nothing to serve) is held until the
// identity has a snapshot again, and the rollback that ends it is answered
// 200 at once — parked (HTTP/1.1) and on the handler's goroutine (HTTP/2)
// alike. The 404 was answered at once, so a runtime left on the revoked
// snapshot learned of the rollback only after its back-off, up to its
// whole interval later. A wait that ends with nothing to serve answers 404
// again; a retired identity (410) is held the same way.
func TestWatchHeldAfterARevocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{handler: configserver.Options{MaxWait: time.Minute}})
	base := e.serve(t, configserver.ServerOptions{ReadTimeout: time.Second, WriteTimeout: time.Second})
	h2 := httptest.NewUnstartedServer(e.handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	ctx := context.Background()
	owner := e.db.Pool(t)
	id := bundle.Identity{Host: "revoked-watch.example", ServiceID: "gw", EnvTag: "prod"}
	tok := e.token(t, id, "gateway")
	older := e.seed.publish(t, id, "gateway", 1, []byte("revoked watch body 1\n"))
	leaked := e.seed.publish(t, id, "gateway", 2, []byte("revoked watch body 2\n"))
	e.seed.move(t, older)
	e.seed.move(t, leaked)
	waitAnswer(t, e, id, http.StatusOK, leaked.ID)
	if _, err := owner.Exec(ctx, `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		VALUES ($1, 'leaked', 'test', now())`, leaked.ID); err != nil {
		t.Fatal(err)
	}
	note, _ := json.Marshal(pointernote.Note{Revoked: true, RevocationID: 1, SnapshotID: leaked.ID})
	if _, err := owner.Exec(ctx, pointernote.SendSQL, string(note)); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, id, http.StatusNotFound, "")

	etag := `"` + leaked.ArtifactDigest + `"`
	// A wait that ends with nothing to serve: 404 again, after the wait.
	a := recvWatch(t, startWatch(&http.Client{Timeout: time.Minute}, base, id, tok, etag, "700ms"), 5*time.Second)
	if a.status != http.StatusNotFound || a.took < 600*time.Millisecond || a.watchMax != "60" {
		t.Fatalf("wait ended with nothing to serve: got %d after %s (watch max %q), want 404 after ~700ms, 60", a.status, a.took, a.watchMax)
	}
	parked := startWatch(&http.Client{Timeout: time.Minute}, base, id, tok, etag, "30s")
	inline := startWatch(h2.Client(), h2.URL, id, tok, etag, "30s")
	expectHeld(t, parked, 1500*time.Millisecond)
	expectHeld(t, inline, 100*time.Millisecond)

	e.seed.move(t, older) // the rollback
	committed := time.Now()
	for name, ch := range map[string]<-chan watchAnswer{"parked": parked, "on HTTP/2": inline} {
		a := recvWatch(t, ch, 5*time.Second)
		if a.status != http.StatusOK || a.snapshot != older.ID || string(a.body) != string(older.Body) {
			t.Fatalf("%s watcher after the rollback: got %d %s, want 200 %s", name, a.status, a.snapshot, older.ID)
		}
		if lag := time.Since(committed); lag > time.Second {
			t.Fatalf("%s watcher answered %s after the rollback's commit, want within 1s", name, lag)
		}
	}

	// Retired: 410, held until the identity is served again.
	retire := func(at string) {
		t.Helper()
		if _, err := owner.Exec(ctx, `UPDATE configpub.current_pointer SET retired_at = `+at+`,
			retired_release_version = CASE WHEN `+at+` IS NULL THEN NULL ELSE 3 END WHERE host = $1`, id.Host); err != nil {
			t.Fatal(err)
		}
		n, _ := json.Marshal(pointernote.Note{Host: id.Host, ServiceID: id.ServiceID, EnvTag: id.EnvTag})
		if _, err := owner.Exec(ctx, pointernote.SendSQL, string(n)); err != nil {
			t.Fatal(err)
		}
	}
	retire("now()")
	waitAnswer(t, e, id, http.StatusGone, "")
	gone := startWatch(&http.Client{Timeout: time.Minute}, base, id, tok, `"`+older.ArtifactDigest+`"`, "30s")
	expectHeld(t, gone, 1500*time.Millisecond)
	e.seed.move(t, older)
	retire("NULL")
	// Served again with the snapshot the watcher names: 304 under the new
	// manifest, long before the 30 s wait ends.
	a = recvWatch(t, gone, 5*time.Second)
	if a.status != http.StatusNotModified || a.snapshot != older.ID || a.header.Get(bundle.HeaderManifest) == "" {
		t.Fatalf("retired identity's watcher after it is served again: got %d %s, want 304 %s with its manifest", a.status, a.snapshot, older.ID)
	}
}

// TestClientWatchAppliesTheRollbackAfterARevocation: a runtime whose
// current snapshot is revoked keeps asking, each request held by the
// server while there is nothing to serve, and applies the rollback within
// a second of its commit — also right after a 404 ended a wait, when it
// used to back off (up to its interval) before asking again.
func TestClientWatchAppliesTheRollbackAfterARevocation(t *testing.T) {
	t.Parallel()
	e, r1, r2 := goldenEnv(t)
	c := goldenClient(t, e, e.srv.URL)
	evs := make(chan *client.Evidence, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Watch(ctx, 2*time.Second, func(ev *client.Evidence, _ error) { evs <- ev })
	}()
	t.Cleanup(func() { cancel(); <-done })
	if ev := nextApplied(t, evs, 5*time.Second); ev.SnapshotID != r1.ID {
		t.Fatalf("first load applied %s, want %s", ev.SnapshotID, r1.ID)
	}
	e.seed.moveAt(t, r2, goldenIssued, 5*time.Minute, 15*time.Minute)
	if ev := nextApplied(t, evs, 5*time.Second); ev.SnapshotID != r2.ID {
		t.Fatalf("applied %s, want release 2 %s", ev.SnapshotID, r2.ID)
	}
	owner := e.db.Pool(t)
	if _, err := owner.Exec(context.Background(), `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		VALUES ($1, 'leaked', 'test', now())`, r2.ID); err != nil {
		t.Fatal(err)
	}
	note, _ := json.Marshal(pointernote.Note{Revoked: true, RevocationID: 1, SnapshotID: r2.ID})
	if _, err := owner.Exec(context.Background(), pointernote.SendSQL, string(note)); err != nil {
		t.Fatal(err)
	}
	// Three answers of nothing to serve: a backing-off client would now
	// wait about its whole interval before asking again.
	for n := 0; n < 3; {
		select {
		case ev := <-evs:
			if ev.Reason == client.ReasonNotFound {
				n++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no NOT_FOUND evidence after the revocation")
		}
	}
	e.seed.moveAt(t, r1, goldenIssued, 5*time.Minute, 15*time.Minute) // the rollback
	committed := time.Now()
	ev := nextAppliedAfterRejections(t, evs, 10*time.Second)
	if lag := time.Since(committed); ev.SnapshotID != r1.ID || lag > time.Second {
		t.Fatalf("after the rollback: applied %s after %s, want %s within 1s", ev.SnapshotID, lag, r1.ID)
	}
}
