package configserver_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver"
)

// TestGracefulShutdown: cancelling Serve's context lets an in-flight request
// finish, refuses new connections, and returns nil.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- configserver.Serve(ctx, ln, h, configserver.ServerOptions{ShutdownTimeout: 5 * time.Second})
	}()
	type result struct {
		status int
		body   string
		err    error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			res <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-started
	cancel()
	r := <-res
	if r.err != nil || r.status != 200 || r.body != "done" {
		t.Fatalf("in-flight request during shutdown: got %d %q %v, want 200 \"done\"", r.status, r.body, r.err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: got %v, want nil after a clean shutdown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after shutdown")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("listener still accepts connections after shutdown")
	}
}
