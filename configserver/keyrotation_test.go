package configserver_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
)

// TestSigningKeyRotation follows the documented rotation of the signing key
// end to end — promoter stores signing with the old and the new key, the
// Config Server, and a runtime that is restarted ("rolled") over one cache
// directory at each step — on a simulated clock:
//
//  1. the runtime trusts the old key; 2. it is rolled to trust both;
//  3. CI switches to the new key and the next renewal re-signs the lease;
//  4. once the last lease signed with the old key has expired, the runtime
//     is rolled to trust the new key only and keeps running from its
//     last-known-good; afterwards a manifest signed with the old (leaked)
//     key is refused.
//
// It also shows why the order matters: a runtime rolled to the new key
// before the renewal refuses what is served, and a disconnected runtime
// rolled to it before the old key's leases expired has nothing to run.
//
// It runs twice: rolling restarts the runtime over its cache directory, and
// rolling in place changes a running client's keys (SetTrustedKeys), which
// must behave as the restart does.
func TestSigningKeyRotation(t *testing.T) {
	t.Parallel()
	for _, inPlace := range []bool{false, true} {
		t.Run(map[bool]string{false: "restart", true: "in place"}[inPlace], func(t *testing.T) {
			t.Parallel()
			testSigningKeyRotation(t, inPlace)
		})
	}
}

func testSigningKeyRotation(t *testing.T, inPlace bool) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	// The clock starts an hour into the golden target's activation window.
	var mu sync.Mutex
	now := goldenCreatedAt.Add(time.Hour)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	oldStore, oldKey := e.openPromoter(t, clock)
	newStore, newKey := e.openPromoter(t, clock)
	trust := func(k *ecdsa.PrivateKey) client.TrustedKey {
		tk, err := client.NewTrustedKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	oldID, newID := trust(oldKey).ID, trust(newKey).ID

	tg1 := goldenTarget(t, "com.networknt.agent-advisor-1.0.0")
	id := bundle.Identity{Host: tg1.Host, ServiceID: tg1.ServiceID, EnvTag: tg1.EnvTag}
	tok := e.token(t, id, tg1.Audience)
	cacheDir := t.TempDir()
	runtime := func(dir string, keys ...*ecdsa.PrivateKey) *client.Client {
		t.Helper()
		var tks []signing.TrustedKey
		for _, k := range keys {
			tks = append(tks, trust(k))
		}
		c, err := client.New(client.Options{ServerURL: e.srv.URL, Identity: id, Audience: tg1.Audience,
			TokenSource: func(context.Context) (string, error) { return tok, nil },
			TrustedKeys: tks, CacheDir: dir, Clock: clockFunc(clock)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// roll gives the runtime c (over dir) the trusted keys keys: a new
	// client restored from dir, or c with its keys changed in place.
	roll := func(c *client.Client, dir string, keys ...*ecdsa.PrivateKey) *client.Client {
		t.Helper()
		if !inPlace {
			r := runtime(dir, keys...)
			_, _ = r.Restore(ctx) // what it restores is checked through Current
			return r
		}
		var tks []signing.TrustedKey
		for _, k := range keys {
			tks = append(tks, trust(k))
		}
		if err := c.SetTrustedKeys(tks); err != nil {
			t.Fatal(err)
		}
		return c
	}
	load := func(c *client.Client, wantOutcome client.Outcome) *client.Evidence {
		t.Helper()
		ev, err := c.Load(ctx)
		if ev.Outcome != wantOutcome {
			t.Fatalf("load: got %s %s (%s, %v), want %s", ev.Outcome, ev.Reason, ev.Detail, err, wantOutcome)
		}
		return ev
	}
	// served waits until the server serves the manifest keyID signed just
	// now: its lease ends 15 minutes after the clock's time.
	served := func(keyID string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, _ := e.do(t, http.MethodHead, configsPath(id), tok)
			exp, _ := time.Parse(time.RFC3339Nano, resp.Header.Get("X-Config-Expires-At"))
			if resp.Header.Get("X-Manifest-Key-Id") == keyID && exp.Equal(clock().Add(15*time.Minute)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("served key %q, lease until %s; want %q, a lease after %s", resp.Header.Get("X-Manifest-Key-Id"),
					resp.Header.Get("X-Config-Expires-At"), keyID, clock())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	r1 := lifecycleRelease(1, tg1)
	if _, err := oldStore.RecordAndActivate(ctx, r1); err != nil {
		t.Fatal(err)
	}
	served(oldID)
	// 1. The runtime trusts the old key; so does one that will be
	// disconnected from here on.
	first := runtime(cacheDir, oldKey)
	load(first, client.OutcomeApplied)
	offline := t.TempDir()
	offlineC := runtime(offline, oldKey)
	load(offlineC, client.OutcomeApplied)

	// Too early: a runtime trusting only the new key refuses what is served.
	early := runtime(t.TempDir(), newKey)
	if ev := load(early, client.OutcomeRejected); ev.Reason != client.ReasonUntrustedKey {
		t.Fatalf("new key only, before the renewal: got %s, want %s", ev.Reason, client.ReasonUntrustedKey)
	}

	// 2. Rolled to trust both keys: it goes on from its last-known-good.
	advance(time.Minute)
	both := roll(first, cacheDir, oldKey, newKey)
	load(both, client.OutcomeUnchanged)

	// 3. CI signs with the new key: the next renewal re-signs the lease.
	advance(3 * time.Minute)
	renewedAt := clock()
	if _, err := newStore.RenewLeases(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	served(newID)
	if ev := load(both, client.OutcomeApplied); ev.Reason != client.ReasonLeaseRenewed {
		t.Fatalf("renewal signed with the new key: got %s, want %s", ev.Reason, client.ReasonLeaseRenewed)
	}

	// Why step 4 waits: the disconnected runtime's last-known-good is still
	// signed by the old key. Rolled to both keys it runs on it until its
	// lease ends; rolled to the new key only, it has nothing to run.
	offlineC = roll(offlineC, offline, oldKey, newKey)
	if _, err := offlineC.Current(); err != nil {
		t.Fatalf("disconnected runtime on both keys: %v", err)
	}
	if !inPlace {
		if ev, err := runtime(offline, newKey).Restore(ctx); err == nil || ev.Reason != client.ReasonUntrustedKey {
			t.Fatalf("disconnected runtime restarted on the new key only: got %v (%s), want %s", err, ev.Reason, client.ReasonUntrustedKey)
		}
	}
	tooEarly := roll(offlineC, offline, newKey)
	if _, err := tooEarly.Current(); !errors.Is(err, client.ErrNoSnapshot) {
		t.Fatalf("disconnected runtime on the new key only: current %v, want ErrNoSnapshot", err)
	}

	// 4. After the old key's last lease (15 minutes from the activation)
	// has expired: the new key only.
	advance(renewedAt.Add(12 * time.Minute).Sub(clock())) // 15:16: the old key's lease ended at 15:15
	if _, err := newStore.RenewLeases(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	served(newID)
	load(both, client.OutcomeApplied)
	advance(time.Minute)
	rolled := roll(both, cacheDir, newKey)
	if snap, err := rolled.Current(); err != nil || snap.SnapshotID != r1.Targets[0].SnapshotID {
		t.Fatalf("rolled to the new key only: current %v, %v; want release 1's snapshot", snap, err)
	}
	load(rolled, client.OutcomeUnchanged)

	// The old key, leaked, signs a pointer move: refused, release 1 kept.
	advance(time.Minute)
	r2 := lifecycleRelease(2, asRelease2(t, tg1))
	if _, err := oldStore.RecordAndActivate(ctx, r2); err != nil {
		t.Fatal(err)
	}
	served(oldID)
	if ev := load(rolled, client.OutcomeRejected); ev.Reason != client.ReasonUntrustedKey || ev.CurrentSnapshotID != r1.Targets[0].SnapshotID {
		t.Fatalf("manifest of the removed key: got %s %s, current %s; want %s, current release 1",
			ev.Outcome, ev.Reason, ev.CurrentSnapshotID, client.ReasonUntrustedKey)
	}
}

// clockFunc adapts a function to client.Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }
