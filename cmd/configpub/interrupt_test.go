package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestInterruptedRunSaysSo: a verb stopped by SIGINT or SIGTERM (compile
// returns the bare context error) is reported as interrupted, naming the
// signal, as main's context sees it; an error that names the signal
// already (a push's "…: interrupt signal received") is not told twice, and
// a run not interrupted is reported as it is. A failure so interrupted
// exits 130 (SIGINT) or 143 (SIGTERM); 3 and a clean stop keep theirs. The signals are real, sent to
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
		ctx, stop := notifyContext(context.Background())
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
		// A failure exits 128 plus the signal's number; an unconfirmed
		// outcome keeps its 3, a clean stop its 0.
		for _, c := range []struct {
			err  error
			want int
		}{
			{ranError{ctx.Err()}, 128 + int(tc.sig)},
			{ranError{unconfirmedError{ctx.Err()}}, exitUnconfirmed},
			{ranError{failClosedError{ctx.Err()}}, exitFailClosed},
			{usageError{errors.New("bad flag")}, exitUsage},
			{nil, exitOK},
		} {
			if got := interruptedExit(ctx, c.err, exitCode(c.err)); got != c.want {
				t.Errorf("%v: %v exits %d, want %d", tc.sig, c.err, got, c.want)
			}
		}
		stop()
	}
}
