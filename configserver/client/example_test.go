package client_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// exampleTB lets Example functions use the test helpers.
type exampleTB struct{ cleanups []func() }

func (e *exampleTB) Helper()           {}
func (e *exampleTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
func (e *exampleTB) Cleanup(f func())  { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) TempDir() string {
	d, err := os.MkdirTemp("", "client-example-*")
	if err != nil {
		panic(err)
	}
	e.Cleanup(func() { os.RemoveAll(d) })
	return d
}
func (e *exampleTB) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

func ExampleClient_Load() {
	e := &exampleTB{}
	defer e.done()
	w := newWorld(e) // an in-process Config Server serving a signed release
	w.srv.set(w.build(w.spec(1)), nil)

	c, err := client.New(client.Options{
		ServerURL:   w.srv.URL,
		Identity:    bundle.Identity{Host: "payments.example", ServiceID: "agent-42", EnvTag: "prod"},
		Audience:    bundle.AudienceAgent,
		TokenSource: func(context.Context) (string, error) { return "test-token", nil },
		TrustedKeys: w.options().TrustedKeys, // from signing.ParsePublicKeys(cosign.pub)
		CacheDir:    w.dir,
		Skew:        30 * time.Second,
		Clock:       w.clock,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ev, err := c.Load(context.Background())
	fmt.Println(ev.Outcome, ev.Reason, err)
	ev, err = c.Load(context.Background())
	fmt.Println(ev.Outcome, ev.Reason, err)

	snap, err := c.Current() // fails closed once the lease is over
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(snap.Envelope.ReleaseVersion, snap.Namespace["agentName"])
	// Output:
	// APPLIED NEW_SNAPSHOT <nil>
	// UNCHANGED NOT_MODIFIED <nil>
	// 1 advisor
}

func ExampleNew_noTrustedKey() {
	_, err := client.New(client.Options{
		Identity: bundle.Identity{Host: "h", ServiceID: "s", EnvTag: "e"},
		Audience: bundle.AudienceAgent,
	})
	fmt.Println(err)
	// Output: new config client: options: no trusted manifest key configured
}

func ExampleCheckPeer() {
	accepted := []client.AcceptedPublication{
		{Agent: "advisor", PublicationID: "0000000c-0000-8000-8000-00000000000c", PolicyDigest: digestOf("policy-12")}, // current
		{Agent: "advisor", PublicationID: "0000000b-0000-8000-8000-00000000000b", PolicyDigest: digestOf("policy-11")}, // previous
	}
	h := http.Header{}
	h.Set("X-Policy-Publication-Id", "0000000b-0000-8000-8000-00000000000b")
	h.Set("X-Policy-Snapshot-Id", "000007dc-0000-8000-8000-0000000007dc")
	h.Set("X-Policy-Digest", digestOf("policy-11"))
	a, err := client.CheckPeer(h, accepted)
	fmt.Println(a.Agent, err)

	h.Set("X-Policy-Digest", digestOf("forged"))
	_, err = client.CheckPeer(h, accepted)
	fmt.Println(err != nil)
	// Output:
	// advisor <nil>
	// true
}

func ExampleClient_Watch() {
	e := &exampleTB{}
	defer e.done()
	w := newWorld(e)
	w.srv.set(w.build(w.spec(1)), nil)
	c := w.client()

	ctx, cancel := context.WithCancel(context.Background())
	err := c.Watch(ctx, 10*time.Millisecond, func(ev *client.Evidence, err error) {
		fmt.Println(ev.Outcome, err)
		if ev.Outcome == client.OutcomeUnchanged {
			cancel()
		}
	})
	fmt.Println(err)
	// Output:
	// APPLIED <nil>
	// UNCHANGED <nil>
	// context canceled
}
