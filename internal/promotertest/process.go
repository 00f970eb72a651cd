package promotertest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a running configpub command whose output is kept.
type Process struct {
	cmd    *exec.Cmd
	start  time.Time
	marker chan struct{} // closed when the marker line has been written
	done   chan error    // receives Wait's result once
	mu     sync.Mutex
	out    bytes.Buffer
}

// KillAt sends SIGKILL delay after the process started (anywhere) or
// delay after its marker line, and waits for it. exitedFirst reports that
// the process ended on its own before the kill, with err its exit.
func (pr *Process) KillAt(anywhere bool, delay time.Duration) (exitedFirst bool, err error) {
	var timer <-chan time.Time
	if anywhere {
		timer = time.After(delay)
	}
	marker := pr.marker
	for {
		select {
		case <-marker:
			marker = nil
			if !anywhere {
				timer = time.After(delay)
			}
		case <-timer:
			_ = pr.cmd.Process.Signal(syscall.SIGKILL)
			<-pr.done
			return false, nil
		case err := <-pr.done:
			return true, err
		}
	}
}

// Start starts cmd and keeps its stdout and stderr; KillAt's marker is the
// first stderr line containing markerText.
func Start(t testing.TB, cmd *exec.Cmd, markerText string) *Process {
	t.Helper()
	pr := &Process{cmd: cmd, marker: make(chan struct{}), done: make(chan error, 1)}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = &lockedWriter{pr}
	pr.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		marked := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = (&lockedWriter{pr}).Write([]byte(line + "\n"))
			if !marked && strings.Contains(line, markerText) {
				marked = true
				close(pr.marker)
			}
		}
		pr.done <- cmd.Wait()
	}()
	return pr
}

// Wait waits for the process to end without a kill. life is how long it
// ran, afterMarker how long it ran after its marker line; ending before the
// marker line is an error too.
func (pr *Process) Wait() (life, afterMarker time.Duration, err error) {
	var marked time.Time
	select {
	case <-pr.marker:
		marked = time.Now()
	case err := <-pr.done:
		return time.Since(pr.start), 0, fmt.Errorf("ended before its marker line: %v", err)
	}
	if err := <-pr.done; err != nil {
		return time.Since(pr.start), time.Since(marked), err
	}
	return time.Since(pr.start), time.Since(marked), nil
}

// Output returns what the process has written so far.
func (pr *Process) Output() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.out.String()
}

type lockedWriter struct{ pr *Process }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.pr.mu.Lock()
	defer w.pr.mu.Unlock()
	return w.pr.out.Write(b)
}

// BuildConfigpub builds the configpub binary into a temporary directory.
func BuildConfigpub(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "configpub")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/configpub/configpub/cmd/configpub")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/configpub: %v\n%s", err, out)
	}
	return bin
}

// EnvInt reads the positive integer environment variable name, def when
// unset.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("promotertest: no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
