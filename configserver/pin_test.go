package configserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// flippingProxy forwards to target and flips one byte in the middle of the
// body of every 200 answer to a path under prefix.
func flippingProxy(t *testing.T, target, prefix string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasPrefix(resp.Request.URL.Path, prefix) || resp.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0x01
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv
}

// TestPinnedSessionAcrossReleasesRestartAndRevocation, against the real
// server and database: a session pinned under release 1 keeps serving
// release 1 after release 2 loads; a restarted runtime re-hydrates it by id
// through GET /configs/snapshots/{id}, fully verified; a historical
// response with one flipped byte is rejected; revoking the snapshot ends
// the pinned work.
func TestPinnedSessionAcrossReleasesRestartAndRevocation(t *testing.T) {
	t.Parallel()
	e, r1, r2 := goldenEnv(t)
	ctx := context.Background()
	cache := t.TempDir()
	inCache := func(o *client.Options) { o.CacheDir = cache }
	c := goldenClient(t, e, e.srv.URL, inCache)
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	session, err := c.Pin(client.PinOptions{OnRevoke: client.DenyOnRevoke})
	if err != nil {
		t.Fatal(err)
	}
	pin := session.Pin()
	if pin.SnapshotID != r1.ID || pin.ArtifactDigest != r1.ArtifactDigest || pin.PublicationID != r1.PublicationID {
		t.Fatalf("pin %+v does not name release 1 (%s)", pin, r1.ID)
	}

	e.seed.moveAt(t, r2, goldenIssued, 5*time.Minute, 15*time.Minute)
	waitServed(t, e, r2.Identity, r2.Audience, r2.ID)
	if ev, err := c.Load(ctx); err != nil || ev.SnapshotID != r2.ID {
		t.Fatalf("release 2 load: %v %+v", err, ev)
	}
	if cur, _ := c.Current(); cur.SnapshotID != r2.ID {
		t.Fatalf("current %s, want release 2 %s", cur.SnapshotID, r2.ID)
	}
	s, err := session.Snapshot()
	if err != nil || s.SnapshotID != r1.ID || !bytes.Equal(s.Values, r1.Body) {
		t.Fatalf("pinned session after release 2 loaded: %v, want release 1's exact bytes", err)
	}

	// A restarted runtime: a new client on the same cache directory, whose
	// token is for a while another identity's (a misconfigured rotation).
	var wrongToken atomic.Bool
	otherToken := e.token(t, bundle.Identity{Host: "someone-else.example", ServiceID: r1.Identity.ServiceID,
		EnvTag: r1.Identity.EnvTag}, r1.Audience)
	restarted := goldenClient(t, e, e.srv.URL, inCache, func(o *client.Options) {
		own := o.TokenSource
		o.TokenSource = func(ctx context.Context) (string, error) {
			if wrongToken.Load() {
				return otherToken, nil
			}
			return own(ctx)
		}
	})
	if _, err := restarted.Load(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := restarted.Rehydrate(ctx, pin, client.PinOptions{OnRevoke: client.DenyOnRevoke})
	if err != nil {
		t.Fatalf("rehydrate: %v", err)
	}
	if s, err := again.Snapshot(); err != nil || s.SnapshotID != r1.ID || !bytes.Equal(s.Values, r1.Body) {
		t.Fatalf("re-hydrated snapshot: %v, want release 1's exact bytes", err)
	}
	// A 403 (the wrong token) marks the pinned snapshot revoked; the next
	// Check answered under a verified manifest clears the mark — a 403 was
	// taken as a revocation for the rest of the session.
	wrongToken.Store(true)
	if err := again.Check(ctx); err != nil {
		t.Fatalf("check with another identity's token: %v", err)
	}
	if _, err := again.Snapshot(); !errors.Is(err, client.ErrPinRevoked) || !strings.Contains(again.Revoked(), "403") {
		t.Fatalf("pinned snapshot after a 403: %v (%q), want ErrPinRevoked naming the 403", err, again.Revoked())
	}
	wrongToken.Store(false)
	if err := again.Check(ctx); err != nil {
		t.Fatalf("check with the right token: %v", err)
	}
	if s, err := again.Snapshot(); err != nil || s.SnapshotID != r1.ID || again.Revoked() != "" {
		t.Fatalf("pinned snapshot after a verified check: %v (%q), want release 1 and no revocation", err, again.Revoked())
	}

	// The pin is checked: another snapshot of the identity is not it.
	other := pin
	other.SnapshotID = r2.ID
	if _, err := restarted.Rehydrate(ctx, other, client.PinOptions{}); !errors.Is(err, client.ErrRejected) {
		t.Fatalf("rehydrate with a pin naming release 2's id but release 1's digests: got %v, want PIN_MISMATCH", err)
	}

	// A tampered historical response: one body byte flipped on the way.
	tampering := flippingProxy(t, e.srv.URL, "/configs/snapshots/")
	viaProxy := goldenClient(t, e, tampering.URL, inCache)
	_, err = viaProxy.Rehydrate(ctx, pin, client.PinOptions{})
	var ve *client.VerificationError
	if !errors.As(err, &ve) || ve.Reason != client.ReasonDigestMismatch {
		t.Fatalf("tampered historical response: got %v, want REJECTED %s", err, client.ReasonDigestMismatch)
	}

	// Revocation of the pinned snapshot ends the pinned work.
	if _, err := e.db.Pool(t).Exec(ctx, `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		VALUES ($1, 'leaked', 'security', now())`, r1.ID); err != nil {
		t.Fatal(err)
	}
	if err := again.Check(ctx); err != nil {
		t.Fatalf("check: %v", err)
	}
	if _, err := again.Snapshot(); !errors.Is(err, client.ErrPinRevoked) {
		t.Fatalf("pinned snapshot after its revocation: got %v, want ErrPinRevoked", err)
	}
	if _, err := restarted.Rehydrate(ctx, pin, client.PinOptions{}); err == nil {
		t.Fatal("a revoked snapshot was re-hydrated")
	}
	// Release 2, not revoked, keeps serving new work.
	if cur, err := restarted.Current(); err != nil || cur.SnapshotID != r2.ID {
		t.Fatalf("current after the revocation: %v, want release 2", err)
	}
}
