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
	_ "time/tzdata" // freeze windows' time zones on machines and images without a zone database

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/configpub/configpub/internal/safetext"
)

func main() {
	// A container's memory limit bounds the heap (see setMemoryLimit); a
	// limit that cannot be read leaves the runtime's default.
	_, _ = setMemoryLimit(memlimit.FromCgroup)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		// An error may quote a setting key, a file name or a server's
		// answer: it must not drive the terminal.
		fmt.Fprintln(os.Stderr, "configpub:", safetext.TerminalLines(err.Error()))
	}
	os.Exit(exitCode(err))
}
