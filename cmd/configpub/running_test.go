package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/syncbuf"
)

// runningCLI is a verb that runs in the background (`lease renew
// --interval`, `fetch --watch`) until the test stops it.
type runningCLI struct {
	out    syncbuf.Buffer // its stdout and stderr
	done   chan error
	cancel context.CancelFunc
}

// startCLI runs the CLI with args in the background; it is interrupted
// when the test ends, if not before.
func startCLI(t *testing.T, args ...string) *runningCLI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningCLI{done: make(chan error, 1), cancel: cancel}
	root := newRootCmd()
	root.SetOut(&r.out)
	root.SetErr(&r.out)
	root.SetArgs(args)
	go func() { r.done <- root.ExecuteContext(ctx) }()
	t.Cleanup(cancel)
	return r
}

// printed reports whether the output holds s.
func (r *runningCLI) printed(s string) bool { return strings.Contains(r.out.String(), s) }

// count is how often the output holds s.
func (r *runningCLI) count(s string) int { return strings.Count(r.out.String(), s) }

// waitFor polls cond until it holds; the test fails after 20 s, or at once
// when the verb ends first.
func (r *runningCLI) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20s; output:\n%s", what, r.out.String())
		}
		select {
		case err := <-r.done:
			t.Fatalf("%s: the command exited: %v; output:\n%s", what, err, r.out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop interrupts the verb; the test fails unless it ends cleanly.
func (r *runningCLI) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("after interrupt: got %v, want nil; output:\n%s", err, r.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not stop after interrupt")
	}
}
