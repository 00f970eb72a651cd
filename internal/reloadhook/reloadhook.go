// Package reloadhook tells a runtime in any language that its configuration
// file changed: it runs a command (with environment variables naming the
// file and the snapshot) or sends a signal to a process. configpub fetch
// --watch uses it after each applied change.
package reloadhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultTimeout bounds one run of Exec when Hook.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// Event is what the hook is told about a change of the file.
type Event struct {
	File           string // the configuration file written (or removed)
	Removed        bool   // the file was removed: the runtime must fail closed
	SnapshotID     string
	PublicationID  string
	ArtifactDigest string // sha256:<hex> of the file's bytes
	ReleaseVersion int64
}

// Env returns the environment variables Exec receives for e.
func (e Event) Env() []string {
	state := "applied"
	if e.Removed {
		state = "removed"
	}
	return []string{
		"CONFIGPUB_EVENT=" + state,
		"CONFIGPUB_FILE=" + e.File,
		"CONFIGPUB_SNAPSHOT_ID=" + e.SnapshotID,
		"CONFIGPUB_PUBLICATION_ID=" + e.PublicationID,
		"CONFIGPUB_ARTIFACT_DIGEST=" + e.ArtifactDigest,
		"CONFIGPUB_RELEASE_VERSION=" + strconv.FormatInt(e.ReleaseVersion, 10),
	}
}

// Hook is a reload hook. The zero value does nothing.
type Hook struct {
	// Exec is a command run by /bin/sh -c with the Event's variables added
	// to the environment; "" runs none.
	Exec string
	// PID, when positive, receives Signal (default SIGHUP).
	PID    int
	Signal syscall.Signal
	// Timeout bounds one run of Exec (the command is killed past it).
	// Default DefaultTimeout.
	Timeout time.Duration
	// Output receives the command's standard output and error. Nil:
	// discarded.
	Output io.Writer
}

// Enabled reports whether h does anything.
func (h *Hook) Enabled() bool { return h.Exec != "" || h.PID > 0 }

// Run runs the command and sends the signal for e. A command that fails
// or times out, and a signal that cannot be delivered, are errors; both
// are attempted.
func (h *Hook) Run(ctx context.Context, e Event) error {
	var errs []error
	if h.Exec != "" {
		timeout := h.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		cmd := exec.CommandContext(cctx, "/bin/sh", "-c", h.Exec)
		cmd.Env = append(os.Environ(), e.Env()...)
		out := h.Output
		if out == nil {
			out = io.Discard
		}
		cmd.Stdout, cmd.Stderr = out, out
		// The command's children go with it: its process group is killed
		// at the timeout, and output pipes are not waited on past it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		if err := cmd.Run(); err != nil {
			if cctx.Err() == context.DeadlineExceeded {
				err = fmt.Errorf("timed out after %s", timeout)
			}
			errs = append(errs, fmt.Errorf("reload hook --exec: %w", err))
		}
		cancel()
	}
	if h.PID > 0 {
		sig := h.Signal
		if sig == 0 {
			sig = syscall.SIGHUP
		}
		if err := syscall.Kill(h.PID, sig); err != nil {
			errs = append(errs, fmt.Errorf("reload hook --signal %d:%s: %w", h.PID, signalName(sig), err))
		}
	}
	return errors.Join(errs...)
}

// signals are the names ParseSignal accepts (without the SIG prefix).
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "TERM": syscall.SIGTERM,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "WINCH": syscall.SIGWINCH,
}

func signalName(s syscall.Signal) string {
	for n, v := range signals {
		if v == s {
			return n
		}
	}
	return strconv.Itoa(int(s))
}

// ParseSignal reads PID[:SIGNAL]: a positive process id and a signal name
// (HUP, SIGHUP, USR1, ...) or number; the signal defaults to HUP.
func ParseSignal(v string) (int, syscall.Signal, error) {
	rawPID, rawSig, hasSig := strings.Cut(v, ":")
	pid, err := strconv.Atoi(rawPID)
	if err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("--signal %q: want PID[:SIGNAL] with a positive process id", v)
	}
	if !hasSig {
		return pid, syscall.SIGHUP, nil
	}
	name := strings.TrimPrefix(strings.ToUpper(rawSig), "SIG")
	if s, ok := signals[name]; ok {
		return pid, s, nil
	}
	if n, err := strconv.Atoi(rawSig); err == nil && n > 0 && n < 65 {
		return pid, syscall.Signal(n), nil
	}
	return 0, 0, fmt.Errorf("--signal %q: unknown signal %q (HUP, INT, QUIT, TERM, USR1, USR2, WINCH or a number)", v, rawSig)
}
