package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/readback"
)

// TestFetchWatchFollowsTheTrustKeyFile: a watching sidecar reads
// --trust-key again every --interval. A key added to the file (the key
// rotation's "add the new key to every runtime") is trusted without a
// restart; an unreadable file keeps the keys in use; a key removed from it
// (a leaked key) is distrusted at once: what it signed, the last-known-good
// included, is refused and the sidecar fails closed.
func TestFetchWatchFollowsTheTrustKeyFile(t *testing.T) {
	s, signerPub := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	_, otherPub := newKeyPEM(t)
	signer, err := os.ReadFile(signerPub)
	if err != nil {
		t.Fatal(err)
	}
	trust := filepath.Join(dir, "trusted.pub")
	writeTrust := func(b []byte) {
		t.Helper()
		if err := atomicfile.Write(trust, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTrust(otherPub) // not the key the server's manifests are signed with
	outFile := filepath.Join(dir, "values.yml")
	r := startCLI(t, append(s.args(t, trust, filepath.Join(dir, "cache"), outFile), "--watch", "--interval", "50ms")...)
	contains := func(s string) func() bool { return func() bool { return r.printed(s) } }
	written := func() bool { _, err := os.Stat(outFile); return err == nil }

	r.waitFor(t, "the untrusted manifest refused", contains(`"reason":"UNTRUSTED_KEY"`))
	if written() {
		t.Fatal("--out written from a manifest no trusted key signed")
	}
	writeTrust(append(append([]byte{}, otherPub...), signer...)) // the key added
	r.waitFor(t, "the added key trusted", contains("changed: trusting"))
	r.waitFor(t, "applied with the added key", written)

	writeTrust([]byte("-----BEGIN PUBLIC KEY-----\nnot base64\n"))
	r.waitFor(t, "the broken file reported", contains("not read again; the keys in use are kept"))
	time.Sleep(200 * time.Millisecond)
	if !written() {
		t.Fatal("a broken trust-key file made the sidecar drop its configuration")
	}

	writeTrust(otherPub) // the signing key removed: leaked
	r.waitFor(t, "failed closed once the key was removed", func() bool { return !written() })
	r.stop(t)
	if n := r.count("changed: trusting"); n != 2 {
		t.Errorf("%d restarts of the client, want 2 (the key added, the key removed):\n%s", n, r.out.String())
	}
}

// TestFetchStatusEndpointSurvivesAKeyChange: the runtime status endpoint
// of a watching sidecar is served again, on the same address, by the
// client started for a changed --trust-key file; a file that names the
// control plane's key is refused and changes nothing; a control key
// rotated in --control-pub is taken without a restart.
func TestFetchStatusEndpointSurvivesAKeyChange(t *testing.T) {
	s, signerPub := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	signer, err := os.ReadFile(signerPub)
	if err != nil {
		t.Fatal(err)
	}
	other, otherPub := newKeyPEM(t)
	trust := filepath.Join(dir, "trusted.pub")
	if err := atomicfile.Write(trust, signer, 0o644); err != nil {
		t.Fatal(err)
	}
	ctlPub := filepath.Join(dir, "control.pub")
	if err := os.WriteFile(ctlPub, otherPub, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	r := startCLI(t, append(s.args(t, trust, filepath.Join(dir, "cache"), filepath.Join(dir, "values.yml")),
		"--watch", "--interval", "50ms", "--status-listen", addr, "--control-pub", ctlPub, "--status-anonymous")...)
	ctx := context.Background()
	current := func() string {
		resp, err := http.Get("http://" + addr + "/status")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		var st struct {
			Current *struct {
				SnapshotID string `json:"snapshotId"`
			} `json:"current"`
		}
		if json.NewDecoder(resp.Body).Decode(&st) != nil || st.Current == nil {
			return ""
		}
		return st.Current.SnapshotID
	}
	want := s.headers.Get("X-Config-Snapshot-Id")
	r.waitFor(t, "status names the applied snapshot", func() bool { return current() == want })
	// The control plane's key is refused as a manifest key; the keys in use
	// go on.
	if err := atomicfile.Write(trust, append(append([]byte{}, signer...), otherPub...), 0o644); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the control key refused", func() bool { return r.printed("is both a trusted manifest key") })
	_, thirdPub := newKeyPEM(t)
	if err := atomicfile.Write(trust, append(append([]byte{}, signer...), thirdPub...), 0o644); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the client started again", func() bool { return r.printed("changed: trusting") })
	r.waitFor(t, "status served again, by the new client", func() bool { return current() == want })

	// The control plane's key rotated in --control-pub: a reload signed by
	// the new key is taken, one signed by the old key refused.
	target := readback.Target{Endpoint: "http://" + addr, Host: s.id.Host, ServiceID: s.id.ServiceID, EnvTag: s.id.EnvTag}
	reloadWith := func(k *ecdsa.PrivateKey) error {
		col, err := readback.NewCollector(readback.Options{Signer: k, Reload: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = col.Read(ctx, target)
		return err
	}
	if err := reloadWith(other); err != nil {
		t.Fatalf("reload signed by the control key: %v", err)
	}
	nextCtl, nextCtlPub := newKeyPEM(t)
	if err := atomicfile.Write(ctlPub, nextCtlPub, 0o644); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the control key changed", func() bool {
		return r.printed("the status endpoint starts again with control key")
	})
	r.waitFor(t, "a reload signed by the new control key", func() bool { return reloadWith(nextCtl) == nil })
	if err := reloadWith(other); err == nil {
		t.Fatal("a reload signed by the replaced control key was taken")
	}
	r.stop(t)
}

// newKeyPEM returns a new P-256 key and its public key as PEM (a
// cosign.pub).
func newKeyPEM(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := signing.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return k, pub
}

// freeAddr returns a 127.0.0.1 address nothing listens on (for a verb to
// listen on).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestFetchWatchWritesTheLastKnownGoodAtStart: a watching sidecar
// restarted with its cache but an empty --out (a pod rescheduled with a
// persistent cache volume and a fresh output volume) writes the verified
// last-known-good at once. Its first request is held by the Config Server
// until the pointer moves; --out used to be written only when that request
// ended, up to --interval later.
func TestFetchWatchWritesTheLastKnownGoodAtStart(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	cache, outFile := filepath.Join(dir, "cache"), filepath.Join(dir, "values.yml")
	if out, err := runCLI(s.args(t, key, cache, outFile)...); err != nil {
		t.Fatalf("first fetch: %v\n%s", err, out)
	}
	want, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(outFile); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.hold = true
	s.mu.Unlock()
	r := startCLI(t, append(s.args(t, key, cache, outFile), "--watch", "--interval", "1h")...)
	r.waitFor(t, "--out written from the last-known-good", func() bool {
		got, err := os.ReadFile(outFile)
		return err == nil && string(got) == string(want)
	})
	r.waitFor(t, "the RESTORED evidence printed", func() bool { return r.printed(`"reason":"RESTORED"`) })
	r.stop(t)
}
