package configserver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

// churnWatcher keeps a held request open on base for id, as a runtime
// does, and records the sequence of every manifest it is answered with.
func churnWatcher(ctx context.Context, c *http.Client, base string, id bundle.Identity, token string, seen chan<- [2]string, errs chan<- error) {
	etag := ""
	var lastSeq int64
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+configsPath(id)+"&wait=2s", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				errs <- err
			}
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK, http.StatusNotModified:
		default:
			errs <- fmt.Errorf("watch answered %d: %s", resp.StatusCode, body)
			return
		}
		raw, err := base64.RawURLEncoding.DecodeString(resp.Header.Get(bundle.HeaderManifest))
		if err != nil {
			errs <- fmt.Errorf("manifest header: %w", err)
			return
		}
		m, err := bundle.ParseDeliveryManifest(raw)
		if err != nil {
			errs <- fmt.Errorf("manifest: %w", err)
			return
		}
		if m.Sequence < lastSeq {
			errs <- fmt.Errorf("answered sequence %d after %d: a move seen out of order", m.Sequence, lastSeq)
			return
		}
		if resp.StatusCode == http.StatusOK && digestOf(body) != m.ArtifactDigest {
			errs <- fmt.Errorf("200 body does not match the manifest's artifactDigest")
			return
		}
		if resp.StatusCode == http.StatusNotModified && resp.Header.Get("ETag") != etag {
			errs <- fmt.Errorf("304 with ETag %s for If-None-Match %s", resp.Header.Get("ETag"), etag)
			return
		}
		lastSeq = m.Sequence
		etag = resp.Header.Get("ETag")
		select {
		case seen <- [2]string{m.SnapshotID, fmt.Sprint(m.Sequence)}:
		default:
		}
	}
}

// TestWatchersUnderChurn: watchers held on the real server through a
// thousand pointer moves between a few snapshots of one identity — moves,
// rollbacks to an earlier snapshot (the same bytes again) and re-signs of
// the current one, some in the same transaction-burst — never see a
// sequence go back, never get a 304 for another ETag, and all end on the
// last move; afterwards no watch is held, no subscription or goroutine is
// left behind.
func TestWatchersUnderChurn(t *testing.T) {
	e := newEnv(t, envOptions{handler: configserver.Options{MaxWait: 30 * time.Second}})
	base := e.serve(t, configserver.ServerOptions{ReadTimeout: time.Second, WriteTimeout: time.Second})
	id := bundle.Identity{Host: "churn.example", ServiceID: "gw", EnvTag: "prod"}
	sns := make([]*snapshot, 4)
	for i := range sns {
		sns[i] = e.seed.publish(t, id, "gateway", int64(i+1), []byte(fmt.Sprintf("churn body %d\n", i)))
	}
	e.seed.move(t, sns[0])
	waitAnswer(t, e, id, http.StatusOK, sns[0].ID)
	runtime.GC()
	before := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	tok := e.token(t, id, "gateway")
	const watchers = 4
	seen := make([]chan [2]string, watchers)
	errs := make(chan error, watchers)
	var wg sync.WaitGroup
	for i := range watchers {
		seen[i] = make(chan [2]string, 4096)
		tr := &http.Transport{}
		c := &http.Client{Transport: tr, Timeout: time.Minute}
		wg.Go(func() {
			defer tr.CloseIdleConnections()
			churnWatcher(ctx, c, base, id, tok, seen[i], errs)
		})
	}
	r := rand.New(rand.NewPCG(1, 2))
	var last *pointerState
	var lastSn *snapshot
	for i := 0; i < 1000; i++ {
		sn := sns[r.IntN(len(sns))]
		last, lastSn = e.seed.move(t, sn), sn
		if r.IntN(10) == 0 {
			time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond)
		}
		select {
		case err := <-errs:
			t.Fatalf("move %d: %v", i, err)
		default:
		}
	}
	want := [2]string{lastSn.ID, fmt.Sprint(last.Parsed.Sequence)}
	for i := range watchers {
		deadline := time.After(5 * time.Second)
	wait:
		for {
			select {
			case got := <-seen[i]:
				if got == want {
					break wait
				}
			case err := <-errs:
				t.Fatalf("watcher %d: %v", i, err)
			case <-deadline:
				t.Fatalf("watcher %d did not end on the last move %v", i, want)
			}
		}
	}
	cancel()
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body := e.do(t, http.MethodGet, "/metrics", "")
		held := ""
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "configpub_server_watchers ") {
				held = strings.TrimPrefix(l, "configpub_server_watchers ")
			}
		}
		runtime.GC()
		n := runtime.NumGoroutine()
		if resp.StatusCode == http.StatusOK && held == "0" && n <= before+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the watchers left: configpub_server_watchers %q, goroutines %d (before %d)", held, n, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
