package daemon_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/daemon"
	"github.com/configpub/configpub/internal/pgtest"
)

// TestShutdownAnswersHeldWatchesFromALiveStore: on SIGTERM (the context
// ends) the held watch requests are answered from the pointers in memory,
// as a plain GET would answer then — here the 404 of an identity with
// nothing to serve. The store stopped following the database on the same
// signal, before the server ended the watches, so that they were answered
// 503 "store unavailable" and every watching runtime reported
// UNAVAILABLE SERVER_ERROR at each rolling restart.
func TestShutdownAnswersHeldWatchesFromALiveStore(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	files, err := auth.GenerateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(files.JWKS); err != nil {
		t.Fatal(err)
	}
	tok := mint(t, files.PrivateKey, "")
	for i := range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- daemon.Run(ctx, daemon.Config{DatabaseURL: db.URLFor(t, "configpub_server"), JWKS: files.JWKS,
				Issuer: issuer, Audience: audience, Listener: ln})
		}()
		base := "http://" + ln.Addr().String()
		waitStatus(t, http.DefaultClient, base+"/readyz", 200)
		answered := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodGet, base+"/configs?host=h1&wait=60s", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answered <- 0
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				t.Logf("%d %s", resp.StatusCode, b) // an error document, never configuration
			}
			answered <- resp.StatusCode
		}()
		time.Sleep(300 * time.Millisecond) // held
		cancel()
		select {
		case got := <-answered:
			if got != http.StatusNotFound {
				t.Fatalf("run %d: held watch at shutdown answered %d, want the 404 it waited with", i, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: held watch not answered within 10s of the shutdown", i)
		}
		if err := <-done; err != nil {
			t.Fatalf("run %d: Run: %v", i, err)
		}
	}
}
