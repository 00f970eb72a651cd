package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestInterruptedRunSaysSo: a verb stopped by SIGINT or SIGTERM (compile
// returns the bare context error) is reported as interrupted, naming the
// signal, as main's context sees it; an error that names the signal
// already (a push's "…: interrupt signal received") is not told twice, and
// a run not interrupted is reported as it is. The signals are real, sent to
// this test process.
func TestInterruptedRunSaysSo(t *testing.T) {
	if got := errorLine(context.Background(), errors.New("open x: no such file")); got != "open x: no such file" {
		t.Errorf("not interrupted: %q", got)
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGINT, "interrupted (interrupt signal received): context canceled"},
		{syscall.SIGTERM, "interrupted (terminated signal received): context canceled"},
	} {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		if err := syscall.Kill(os.Getpid(), tc.sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v: the context did not end", tc.sig)
		}
		if got := errorLine(ctx, ctx.Err()); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.sig, got, tc.want)
		}
		named := fmt.Errorf("push blob: %w", context.Cause(ctx))
		if got := errorLine(ctx, named); got != named.Error() {
			t.Errorf("%v: got %q, want %q as it is", tc.sig, got, named)
		}
		stop()
	}
}
