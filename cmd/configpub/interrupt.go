package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// interruption is the cause of a run's context ended by a signal: its
// message is signal.NotifyContext's ("interrupt signal received"), and it
// keeps the signal for the exit code.
type interruption struct{ sig syscall.Signal }

func (e interruption) Error() string { return e.sig.String() + " signal received" }

// Is makes an interruption match context.Canceled, as the context's error.
func (e interruption) Is(target error) bool { return target == context.Canceled }

// notifyContext is signal.NotifyContext for SIGINT and SIGTERM, whose cause
// (context.Cause) is an interruption naming the signal received first.
// Later signals are taken, not acted on, until stop.
func notifyContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			if sig, ok := s.(syscall.Signal); ok {
				cancel(interruption{sig})
			} else {
				cancel(interruption{syscall.SIGINT})
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(nil)
	}
}

// interruptedExit is the exit code of a run under ctx that ended with
// err: 128 plus the signal's number (130 for SIGINT, 143 for SIGTERM, as a
// shell reports a command a signal ended) when a signal interrupted it and
// it failed as a refusal would (code 1); code otherwise — 0 for a run that
// stopped cleanly (the servers, fetch --watch), and 3 kept for an outcome
// that could not be confirmed or a fetch that failed closed, which say
// more than that it was interrupted.
func interruptedExit(ctx context.Context, err error, code int) int {
	var in interruption
	if err == nil || code != exitRefused || !errors.As(context.Cause(ctx), &in) {
		return code
	}
	return 128 + int(in.sig)
}
