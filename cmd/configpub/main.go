// Command configpub compiles, publishes, promotes and delivers immutable,
// per-audience runtime policy. Every verb is a thin call into a library
// package; see the README for the CLI reference.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	_ "time/tzdata" // freeze windows' time zones on machines and images without a zone database

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/internal/safetext"
)

func main() {
	// A container's memory limit bounds the heap (see setMemoryLimit); a
	// limit that cannot be read leaves the runtime's default.
	_, _ = setMemoryLimit(memlimit.FromCgroup)
	ctx, stop := notifyContext(context.Background())
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	line := errorLine(ctx, err)                      // before stop, which cancels ctx as well
	code := interruptedExit(ctx, err, exitCode(err)) // 130 or 143 when a signal ended it
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "configpub:", line)
	}
	os.Exit(code)
}

// errorLine is the text printed for err, which ended a run under ctx (""
// for none). An error may quote a setting key, a file name or a server's
// answer: it must not drive the terminal. A run stopped by SIGINT or
// SIGTERM mostly ends in a bare "context canceled"; the line then says it
// was interrupted, and by which signal.
func errorLine(ctx context.Context, err error) string {
	if err == nil {
		return ""
	}
	msg := pgsession.ErrorText(err) // a connection's failed attempts in one line
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		// A signal's cause is its own error (which Is context.Canceled).
		if cause != ctx.Err() && !strings.Contains(msg, cause.Error()) {
			msg = fmt.Sprintf("interrupted (%v): %s", cause, msg)
		}
	}
	return safetext.TerminalLines(msg)
}
