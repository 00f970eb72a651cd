package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/configpub/configpub/configserver/client"
)

// A session pins the snapshot current when it starts and keeps its policy
// while newer snapshots load; after a restart it is re-hydrated by id,
// fully verified; a revocation ends it.
func ExampleClient_Pin() {
	e := &exampleTB{}
	defer e.done()
	ctx := context.Background()
	w := newWorld(e) // an in-process Config Server serving signed releases
	w.srv.set(w.build(w.spec(1)), nil)
	c := w.client()
	if _, err := c.Load(ctx); err != nil {
		fmt.Println(err)
		return
	}
	session, err := c.Pin(client.PinOptions{OnRevoke: client.DenyOnRevoke})
	if err != nil {
		fmt.Println(err)
		return
	}
	saved, _ := json.Marshal(session.Pin()) // store it with the session

	w.srv.set(w.build(w.spec(2)), nil) // release 2 becomes current
	_, _ = c.Load(ctx)
	current, _ := c.Current()
	pinned, _ := session.Snapshot()
	fmt.Println("new work runs release", current.Envelope.ReleaseVersion)
	fmt.Println("the session runs release", pinned.Envelope.ReleaseVersion)

	// After a restart: a new Client, the saved pin.
	restarted := w.client()
	var pin client.Pin
	_ = json.Unmarshal(saved, &pin)
	again, err := restarted.Rehydrate(ctx, pin, client.PinOptions{OnRevoke: client.DenyOnRevoke})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := again.Snapshot()
	fmt.Println("re-hydrated release", s.Envelope.ReleaseVersion)

	w.srv.revoke(pin.SnapshotID) // the server stops serving it
	_ = again.Check(ctx)
	_, err = again.Snapshot()
	fmt.Println("after the revocation:", errors.Is(err, client.ErrPinRevoked))
	// Output:
	// new work runs release 2
	// the session runs release 1
	// re-hydrated release 1
	// after the revocation: true
}

// With AllowUntilLeaseEnds, pinned work may finish under a revoked
// snapshot, but not past the lease of its last verified manifest.
func ExamplePinned_Check() {
	e := &exampleTB{}
	defer e.done()
	ctx := context.Background()
	w := newWorld(e)
	w.srv.set(w.build(w.spec(1)), nil)
	c := w.client()
	_, _ = c.Load(ctx)
	session, _ := c.Pin(client.PinOptions{OnRevoke: client.AllowUntilLeaseEnds})

	w.srv.revoke(session.Pin().SnapshotID)
	_ = session.Check(ctx)
	_, err := session.Snapshot()
	fmt.Println("revoked:", session.Revoked() != "", "still serving:", err == nil)

	w.clock.Advance(2*time.Hour + time.Minute) // past the lease and its skew
	_, err = session.Snapshot()
	fmt.Println("after the lease:", errors.Is(err, client.ErrExpired))
	// Output:
	// revoked: true still serving: true
	// after the lease: true
}
