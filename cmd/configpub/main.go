// Command configpub compiles, publishes, promotes and delivers immutable,
// per-audience runtime policy. Every verb is a thin call into a library
// package; see the README for the CLI reference.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "configpub:", err)
	}
	os.Exit(exitCode(err))
}
