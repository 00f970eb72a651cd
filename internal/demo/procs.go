package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// procs runs configpub verbs as child processes and owns the background
// services, so that cleanup can stop every one of them.
type procs struct {
	bin string
	env []string
	out io.Writer
	dir string // where the pid file lives

	mu       sync.Mutex
	services []*exec.Cmd
}

// run executes `configpub args...`, echoing the command line and, indented,
// its output. It returns stdout. A non-zero exit is an error that carries
// the exit code (see exitCode).
func (p *procs) run(ctx context.Context, args ...string) ([]byte, error) {
	return p.runQuiet(ctx, true, args...)
}

func (p *procs) runQuiet(ctx context.Context, echo bool, args ...string) ([]byte, error) {
	fmt.Fprintf(p.out, "  $ configpub %s\n", shellJoin(args))
	cmd := exec.CommandContext(ctx, p.bin, args...)
	cmd.Env = p.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if echo {
		indent(p.out, stdout.Bytes())
	}
	indent(p.out, stderr.Bytes())
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("configpub %s: %w", args[0], err)
	}
	return stdout.Bytes(), nil
}

// exitCode returns the exit status carried by an error from run, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// start launches a long-running verb in its own process group and waits
// until ready answers 200 (or the process dies).
func (p *procs) start(ctx context.Context, name, ready string, args ...string) error {
	fmt.Fprintf(p.out, "  $ configpub %s &\n", shellJoin(args))
	logPath := filepath.Join(p.dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Env = p.env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf.Close()
	p.mu.Lock()
	p.services = append(p.services, cmd)
	p.writePIDs()
	p.mu.Unlock()

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logPath)
			return fmt.Errorf("%s exited before it was ready (%v); log:\n%s", name, err, tail(log, 2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				fmt.Fprintf(p.out, "    %s is ready (pid %d, log %s)\n", name, cmd.Process.Pid, rel(logPath))
				return nil
			}
		}
	}
	return fmt.Errorf("%s was not ready within 30s at %s", name, ready)
}

// stopAll terminates every background service: SIGTERM to its process
// group, SIGKILL after a grace period.
func (p *procs) stopAll() {
	p.mu.Lock()
	svcs := p.services
	p.services = nil
	p.mu.Unlock()
	for _, cmd := range svcs {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, cmd := range svcs {
		for time.Now().Before(deadline) && alive(cmd.Process.Pid) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(cmd.Process.Pid) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	_ = os.Remove(filepath.Join(p.dir, "pids"))
}

// writePIDs records the services' pids so that a later run can stop
// leftovers of a run that was killed outright. Callers hold p.mu.
func (p *procs) writePIDs() {
	var b strings.Builder
	for _, c := range p.services {
		b.WriteString(strconv.Itoa(c.Process.Pid))
		b.WriteByte('\n')
	}
	_ = os.WriteFile(filepath.Join(p.dir, "pids"), []byte(b.String()), 0o644)
}

// killStale stops the process groups listed in a previous run's pid file.
func killStale(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && alive(pid) {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func indent(w io.Writer, b []byte) {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return
	}
	for _, line := range strings.Split(s, "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'$`\\*?") {
			out[i] = strconv.Quote(a)
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// rel shortens a path relative to the working directory for display.
func rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}
