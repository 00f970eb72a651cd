package configserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/auth"
)

// watchAnswer is what one held GET /configs?wait= got back.
type watchAnswer struct {
	status   int
	snapshot string
	watchMax string
	body     []byte
	header   http.Header
	closed   bool // the answer said "Connection: close"
	took     time.Duration
	err      error
}

// startWatch sends GET base/configs?...&wait= with If-None-Match etag and
// delivers the answer on the returned channel.
func startWatch(c *http.Client, base string, id bundle.Identity, token, etag, wait string) <-chan watchAnswer {
	out := make(chan watchAnswer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, base+configsPath(id)+"&wait="+wait, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("If-None-Match", etag)
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			out <- watchAnswer{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out <- watchAnswer{status: resp.StatusCode, snapshot: resp.Header.Get(bundle.HeaderSnapshotID),
			watchMax: resp.Header.Get(bundle.HeaderWatchMax), body: body, header: resp.Header, closed: resp.Close, took: time.Since(t0), err: err}
	}()
	return out
}

func recvWatch(t *testing.T, ch <-chan watchAnswer, within time.Duration) watchAnswer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("watch request: %v", a.err)
		}
		return a
	case <-time.After(within):
		t.Fatalf("no answer within %s", within)
		return watchAnswer{}
	}
}

func expectHeld(t *testing.T, ch <-chan watchAnswer, d time.Duration) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("watch answered %d (%v) after %s while nothing changed; want it held", a.status, a.err, a.took)
	case <-time.After(d):
	}
}

// TestWatchWakesOnMoveAndTimesOut: watchers holding the current ETag are
// answered 200 with the new snapshot within a second of the commit that
// moves their pointer, and only theirs; a watcher whose wait ends gets 304;
// a stale ETag answers at once; every answer advertises the server's bound.
func TestWatchWakesOnMoveAndTimesOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{handler: configserver.Options{MaxWait: 30 * time.Second}})
	base := e.serve(t, configserver.ServerOptions{ReadTimeout: time.Second, WriteTimeout: time.Second})
	c := &http.Client{Timeout: time.Minute}
	ids := make([]bundle.Identity, 4)
	sns := make([]*snapshot, len(ids))
	for i := range ids {
		ids[i] = bundle.Identity{Host: fmt.Sprintf("watch-%d.example", i), ServiceID: "gw", EnvTag: "prod"}
		sns[i] = e.seed.publish(t, ids[i], "gateway", 1, []byte(fmt.Sprintf("watch body %d\n", i)))
		e.seed.move(t, sns[i])
	}
	for i := range ids {
		waitAnswer(t, e, ids[i], http.StatusOK, sns[i].ID)
	}
	etag := func(i int) string { return `"` + sns[i].ArtifactDigest + `"` }

	// Two watchers on identity 0, one on identity 1; all held. The wait
	// outlives the server's 1 s read and write timeouts.
	w0a := startWatch(c, base, ids[0], e.token(t, ids[0], "gateway"), etag(0), "20s")
	w0b := startWatch(c, base, ids[0], e.token(t, ids[0], "gateway"), etag(0), "20")
	w1 := startWatch(c, base, ids[1], e.token(t, ids[1], "gateway"), etag(1), "20s")
	expectHeld(t, w0a, 1500*time.Millisecond)

	next := e.seed.publish(t, ids[0], "gateway", 2, []byte("watch body 0, release 2\n"))
	e.seed.move(t, next)
	committed := time.Now()
	for _, ch := range []<-chan watchAnswer{w0a, w0b} {
		a := recvWatch(t, ch, 5*time.Second)
		if a.status != http.StatusOK || a.snapshot != next.ID || string(a.body) != string(next.Body) {
			t.Fatalf("after the move: got %d snapshot %s body %q, want 200 %s with the new bytes", a.status, a.snapshot, a.body, next.ID)
		}
		if lag := time.Since(committed); lag > time.Second {
			t.Fatalf("watcher answered %s after the commit, want within 1s", lag)
		}
		if a.watchMax != "30" {
			t.Fatalf("X-Config-Watch-Max: got %q, want %q", a.watchMax, "30")
		}
	}
	expectHeld(t, w1, 300*time.Millisecond) // another identity's move does not wake it

	// A short wait ends with 304 and the same identity headers.
	a := recvWatch(t, startWatch(c, base, ids[2], e.token(t, ids[2], "gateway"), etag(2), "700ms"), 5*time.Second)
	if a.status != http.StatusNotModified || a.snapshot != sns[2].ID || a.took < 600*time.Millisecond {
		t.Fatalf("wait ended: got %d snapshot %s after %s, want 304 %s after ~700ms", a.status, a.snapshot, a.took, sns[2].ID)
	}
	// An ETag that is not current answers at once with the current bytes.
	a = recvWatch(t, startWatch(c, base, ids[0], e.token(t, ids[0], "gateway"), etag(0), "20s"), 2*time.Second)
	if a.status != http.StatusOK || a.snapshot != next.ID || a.took > time.Second {
		t.Fatalf("stale ETag: got %d %s after %s, want an immediate 200 %s", a.status, a.snapshot, a.took, next.ID)
	}
	// A wait above the bound is lowered to it, not refused; a bad one is 400.
	resp, _ := e.do(t, http.MethodGet, configsPath(ids[3])+"&wait=1h", e.token(t, ids[3], "gateway"))
	if resp.StatusCode != http.StatusOK || resp.Header.Get(bundle.HeaderWatchMax) != "30" {
		t.Fatalf("wait=1h without If-None-Match: got %d, watch max %q; want 200, 30", resp.StatusCode, resp.Header.Get(bundle.HeaderWatchMax))
	}
	for _, bad := range []string{"-5s", "soon", "1s&wait=2s"} {
		resp, _ := e.do(t, http.MethodGet, configsPath(ids[3])+"&wait="+bad, e.token(t, ids[3], "gateway"))
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(bundle.HeaderWatchMax) != "30" {
			t.Errorf("wait=%s: got %d, watch max %q; want 400, 30", bad, resp.StatusCode, resp.Header.Get(bundle.HeaderWatchMax))
		}
	}
	// wait=0 is answered at once, and says that this server holds
	// requests, so that a client asking for 0 keeps watching.
	for _, zero := range []string{"0", "0s"} {
		resp, _ := e.do(t, http.MethodGet, configsPath(ids[3])+"&wait="+zero, e.token(t, ids[3], "gateway"))
		if resp.StatusCode != http.StatusOK || resp.Header.Get(bundle.HeaderWatchMax) != "30" {
			t.Errorf("wait=%s: got %d, watch max %q; want 200, 30", zero, resp.StatusCode, resp.Header.Get(bundle.HeaderWatchMax))
		}
	}
	// Without wait= nothing is announced.
	if resp, _ := e.do(t, http.MethodGet, configsPath(ids[3]), e.token(t, ids[3], "gateway")); resp.Header.Get(bundle.HeaderWatchMax) != "" {
		t.Errorf("a request without wait= was answered with X-Config-Watch-Max %q", resp.Header.Get(bundle.HeaderWatchMax))
	}
	// Retirement of the watched identity answers its watcher 410 at once.
	err := pgx.BeginFunc(context.Background(), e.db.Pool(t), func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), `UPDATE configpub.current_pointer SET retired_at = now(), retired_release_version = 2 WHERE host = $1`, ids[1].Host); err != nil {
			return err
		}
		_, err := tx.Exec(context.Background(), `SELECT pg_notify('configpub_pointer', json_build_object('host', $1::text,
			'serviceId', 'gw', 'envTag', 'prod', 'retired', true)::text)`, ids[1].Host)
		return err
	})
	if err != nil {
		t.Fatalf("retire %s: %v", ids[1], err)
	}
	a = recvWatch(t, w1, 5*time.Second)
	if a.status != http.StatusGone {
		t.Fatalf("retired identity's watcher: got %d, want 410", a.status)
	}
}

// TestWatchAnswerHeadersMatchPlainGet: a parked watch's answer, written
// from the delivery's prebuilt header lines, carries exactly the headers
// and bytes a plain GET of the same snapshot carries (plus
// "Connection: close"), for the 200 of a move and the 304 of an ended wait.
func TestWatchAnswerHeadersMatchPlainGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{handler: configserver.Options{MaxWait: 30 * time.Second}})
	base := e.serve(t, configserver.ServerOptions{})
	c := &http.Client{Timeout: time.Minute}
	id := bundle.Identity{Host: "watch-headers.example", ServiceID: "gw", EnvTag: "prod"}
	tok := e.token(t, id, "gateway")
	first := e.seed.publish(t, id, "gateway", 1, []byte("headers body 1\n"))
	e.seed.move(t, first)
	waitAnswer(t, e, id, http.StatusOK, first.ID)
	etag := `"` + first.ArtifactDigest + `"`

	compare := func(what string, got watchAnswer, ifNoneMatch string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+configsPath(id)+"&wait=30s", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if ifNoneMatch != "" {
			req.Header.Set("If-None-Match", ifNoneMatch)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got.status != resp.StatusCode || string(got.body) != string(body) {
			t.Fatalf("%s: watch got %d %q, plain GET %d %q", what, got.status, got.body, resp.StatusCode, body)
		}
		if !got.closed {
			t.Errorf("%s: answer without Connection: close", what)
		}
		if _, err := http.ParseTime(got.header.Get("Date")); err != nil {
			t.Errorf("%s: Date %q: %v", what, got.header.Get("Date"), err)
		}
		for _, h := range []http.Header{got.header, resp.Header} {
			h.Del("Date")
			h.Del("Connection")
		}
		if fmt.Sprint(got.header) != fmt.Sprint(resp.Header) {
			t.Fatalf("%s: watch answer headers\n%v\nplain GET headers\n%v", what, got.header, resp.Header)
		}
	}

	held := startWatch(c, base, id, tok, etag, "20s")
	expectHeld(t, held, 300*time.Millisecond)
	next := e.seed.publish(t, id, "gateway", 2, []byte("headers body 2\n"))
	e.seed.move(t, next)
	moved := recvWatch(t, held, 5*time.Second)
	if moved.status != http.StatusOK || moved.snapshot != next.ID {
		t.Fatalf("after the move: got %d %s, want 200 %s", moved.status, moved.snapshot, next.ID)
	}
	compare("200 after a move", moved, etag)

	ended := recvWatch(t, startWatch(c, base, id, tok, `"`+next.ArtifactDigest+`"`, "300ms"), 5*time.Second)
	if ended.status != http.StatusNotModified {
		t.Fatalf("ended wait: got %d, want 304", ended.status)
	}
	compare("304 at the end of the wait", ended, `"`+next.ArtifactDigest+`"`)
}

// TestWatchShutdownAnswersEveryWaiter: shutting the server down answers
// every held watch at once (304 with the current snapshot), long before the
// end of their waits, and Serve returns cleanly.
func TestWatchShutdownAnswersEveryWaiter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := bundle.Identity{Host: "shutdown.example", ServiceID: "gw", EnvTag: "prod"}
	sn := e.seed.publish(t, id, "gateway", 1, []byte("shutdown body\n"))
	e.seed.move(t, sn)
	waitAnswer(t, e, id, http.StatusOK, sn.ID)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- configserver.Serve(ctx, ln, e.handler, configserver.ServerOptions{ShutdownTimeout: 10 * time.Second})
	}()
	base := "http://" + ln.Addr().String()
	c := &http.Client{Timeout: time.Minute}
	tok := e.token(t, id, "gateway")
	var chans []<-chan watchAnswer
	for range 5 {
		chans = append(chans, startWatch(c, base, id, tok, `"`+sn.ArtifactDigest+`"`, "4m"))
	}
	expectHeld(t, chans[0], time.Second)
	cancel()
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case a := <-ch:
				if a.err != nil || a.status != http.StatusNotModified || a.snapshot != sn.ID || a.took > 5*time.Second {
					t.Errorf("at shutdown: got %d %s after %s (%v), want 304 %s at once", a.status, a.snapshot, a.took, a.err, sn.ID)
				}
			case <-time.After(5 * time.Second):
				t.Error("a held watch was not answered within 5s of the shutdown")
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: got %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after shutdown")
	}
}

// TestHeldRequestsAreBounded: found by attacking the server with one
// workload token. A held request never outlives its token: one whose token
// expires in 2 s is answered (304, while the token is valid) then, not at
// the end of its 30 s wait — a parked request was answered with new
// configuration after its token had expired. And one identity may hold
// MaxWatchesPerIdentity requests at once: one more is answered 429 at once
// with Retry-After, while another identity still holds — one token held
// every file descriptor of the server with 20,000 parked requests.
func TestHeldRequestsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{handler: configserver.Options{MaxWait: 30 * time.Second, MaxWatchesPerIdentity: 2}})
	base := e.serve(t, configserver.ServerOptions{})
	c := &http.Client{Timeout: time.Minute}
	id := bundle.Identity{Host: "watch-bounded.example", ServiceID: "gw", EnvTag: "prod"}
	other := bundle.Identity{Host: "watch-bounded-other.example", ServiceID: "gw", EnvTag: "prod"}
	etags := map[bundle.Identity]string{}
	for _, x := range []bundle.Identity{id, other} {
		s := e.seed.publish(t, x, "gateway", 1, []byte("bounded "+x.Host+"\n"))
		e.seed.move(t, s)
		waitAnswer(t, e, x, http.StatusOK, s.ID)
		etags[x] = `"` + s.ArtifactDigest + `"`
	}

	short, err := auth.Mint(e.tokenKey, auth.MintOptions{Issuer: issuer, Audience: audience, Host: id.Host,
		ServiceID: id.ServiceID, EnvTag: id.EnvTag, ConfigAudience: "gateway", TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a := recvWatch(t, startWatch(c, base, id, short, etags[id], "30s"), 10*time.Second)
	if a.status != http.StatusNotModified || a.took > 5*time.Second {
		t.Fatalf("held request of a token that expires in 2 s: %d after %s, want 304 by its expiry", a.status, a.took)
	}

	tok := e.token(t, id, "gateway")
	held := []<-chan watchAnswer{startWatch(c, base, id, tok, etags[id], "30s"), startWatch(c, base, id, tok, etags[id], "30s")}
	for _, h := range held {
		expectHeld(t, h, 300*time.Millisecond)
	}
	third := recvWatch(t, startWatch(c, base, id, tok, etags[id], "30s"), 5*time.Second)
	if third.status != http.StatusTooManyRequests || third.header.Get("Retry-After") == "" || third.took > 2*time.Second {
		t.Fatalf("a third held request of one identity: %d (Retry-After %q) after %s, want 429 at once",
			third.status, third.header.Get("Retry-After"), third.took)
	}
	otherHeld := startWatch(c, base, other, e.token(t, other, "gateway"), etags[other], "30s")
	expectHeld(t, otherHeld, 300*time.Millisecond)
	// Once one of the two ends (its pointer moved), the identity may hold
	// again.
	next := e.seed.publish(t, id, "gateway", 2, []byte("bounded next\n"))
	e.seed.move(t, next)
	for _, h := range held {
		if a := recvWatch(t, h, 5*time.Second); a.status != http.StatusOK {
			t.Fatalf("held request after the move: %d, want 200", a.status)
		}
	}
	again := startWatch(c, base, id, tok, `"`+next.ArtifactDigest+`"`, "30s")
	expectHeld(t, again, 300*time.Millisecond)
}

// TestAGoneClientFreesItsSlot: a parked request is not read while it waits,
// so a client that went away held one of its identity's slots until the
// wait ended — a runtime restarting in a loop, or one dropping its
// connections, was refused 429 by its own dead requests. At the limit the
// server now looks for requests whose clients have closed and answers them,
// and the new request is held; live ones still count.
func TestAGoneClientFreesItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{handler: configserver.Options{MaxWait: 30 * time.Second, MaxWatchesPerIdentity: 2}})
	base := e.serve(t, configserver.ServerOptions{})
	id := bundle.Identity{Host: "watch-gone.example", ServiceID: "gw", EnvTag: "prod"}
	s := e.seed.publish(t, id, "gateway", 1, []byte("gone\n"))
	e.seed.move(t, s)
	waitAnswer(t, e, id, http.StatusOK, s.ID)
	etag := `"` + s.ArtifactDigest + `"`
	tok := e.token(t, id, "gateway")

	// Two clients park and go away (their connections closed).
	for range 2 {
		c := &http.Client{Transport: &http.Transport{}, Timeout: 500 * time.Millisecond}
		a := <-startWatch(c, base, id, tok, etag, "30s")
		if a.err == nil {
			t.Fatalf("a held request answered %d before its client gave up; want it held", a.status)
		}
		c.CloseIdleConnections()
	}
	c := &http.Client{Timeout: time.Minute}
	var held <-chan watchAnswer
	for try := 0; ; try++ {
		held = startWatch(c, base, id, tok, etag, "30s")
		select {
		case a := <-held:
			if a.status != http.StatusTooManyRequests || try == 20 {
				t.Fatalf("a request after two clients went away: %d (%v) after %d tries, want it held", a.status, a.err, try)
			}
			time.Sleep(50 * time.Millisecond) // the closes may not have reached the server yet
			continue
		case <-time.After(300 * time.Millisecond):
		}
		break
	}
	// A live request still counts: the identity now holds one live and may
	// hold one more, then is refused.
	expectHeld(t, startWatch(c, base, id, tok, etag, "30s"), 300*time.Millisecond)
	if a := recvWatch(t, startWatch(c, base, id, tok, etag, "30s"), 5*time.Second); a.status != http.StatusTooManyRequests {
		t.Fatalf("a third request with two live ones held: %d, want 429", a.status)
	}
	next := e.seed.publish(t, id, "gateway", 2, []byte("gone next\n"))
	e.seed.move(t, next)
	if a := recvWatch(t, held, 5*time.Second); a.status != http.StatusOK {
		t.Fatalf("held request after the move: %d, want 200", a.status)
	}
}

// swappableKeys is a token key source whose set a test replaces (what a
// re-read JWKS file does).
type swappableKeys struct{ set atomic.Pointer[auth.KeySet] }

func (s *swappableKeys) KeySet() *auth.KeySet { return s.set.Load() }

// TestHeldRequestOfARemovedKey: a request held since its token was
// verified is answered only while the token's key is still trusted. Once
// the key is removed from the key set (a leaked key taken out of the
// JWKS), the pointer move that wakes the request is answered 401, not with
// the new configuration; a request of another identity whose token's key
// stays trusted gets its 200. A held request used to be answered with
// whatever its identity's answer became, up to --max-wait after the key
// was removed.
func TestHeldRequestOfARemovedKey(t *testing.T) {
	t.Parallel()
	keys := &swappableKeys{}
	var tokenKey auth.Key
	e := newEnv(t, envOptions{handler: configserver.Options{MaxWait: 30 * time.Second},
		keys: func(k auth.Key) auth.KeySource {
			tokenKey = k
			keys.set.Store(&auth.KeySet{Keys: []auth.Key{k}, Generation: 1})
			return keys
		}})
	base := e.serve(t, configserver.ServerOptions{})
	c := &http.Client{Timeout: time.Minute}
	id := bundle.Identity{Host: "watch-removed-key.example", ServiceID: "gw", EnvTag: "prod"}
	s := e.seed.publish(t, id, "gateway", 1, []byte("removed key\n"))
	e.seed.move(t, s)
	waitAnswer(t, e, id, http.StatusOK, s.ID)
	held := startWatch(c, base, id, e.token(t, id, "gateway"), `"`+s.ArtifactDigest+`"`, "30s")
	expectHeld(t, held, 300*time.Millisecond)

	// The key leaves the set (another takes its place), then the pointer
	// moves.
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys.set.Store(&auth.KeySet{Keys: []auth.Key{{ID: "next", Algorithm: auth.ES256, Public: other.Public()}}, Generation: 2})
	next := e.seed.publish(t, id, "gateway", 2, []byte("removed key next\n"))
	e.seed.move(t, next)
	a := recvWatch(t, held, 5*time.Second)
	if a.status != http.StatusUnauthorized || a.snapshot != "" || len(a.body) > 0 && strings.Contains(string(a.body), "removed key next") {
		t.Fatalf("held request of a removed key after the move: %d (snapshot %q), want 401 without the new configuration", a.status, a.snapshot)
	}
	// With its key back, the identity is served again.
	keys.set.Store(&auth.KeySet{Keys: []auth.Key{tokenKey}, Generation: 3})
	waitAnswer(t, e, id, http.StatusOK, next.ID)
}
