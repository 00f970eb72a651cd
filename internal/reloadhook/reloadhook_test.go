package reloadhook

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseSignal(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		pid      int
		sig      syscall.Signal
		bad      bool
	}{
		{name: "pid only", in: "42", pid: 42, sig: syscall.SIGHUP},
		{name: "name", in: "42:USR1", pid: 42, sig: syscall.SIGUSR1},
		{name: "SIG prefix, lower case", in: "42:sigterm", pid: 42, sig: syscall.SIGTERM},
		{name: "number", in: "42:10", pid: 42, sig: syscall.Signal(10)},
		{name: "zero pid", in: "0:HUP", bad: true},
		{name: "negative pid", in: "-1", bad: true},
		{name: "unknown signal", in: "42:BOOM", bad: true},
		{name: "empty", in: "", bad: true},
	} {
		pid, sig, err := ParseSignal(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: ParseSignal(%q) = %d, %v; want an error", tc.name, tc.in, pid, sig)
			}
			continue
		}
		if err != nil || pid != tc.pid || sig != tc.sig {
			t.Errorf("%s: ParseSignal(%q) = %d, %v, %v; want %d, %v", tc.name, tc.in, pid, sig, err, tc.pid, tc.sig)
		}
	}
}

// TestExecTimeout: a hook that outlives its timeout is killed and reported.
func TestExecTimeout(t *testing.T) {
	h := &Hook{Exec: "sleep 5", Timeout: 200 * time.Millisecond}
	start := time.Now()
	err := h.Run(context.Background(), Event{File: "x"})
	if err == nil || !strings.Contains(err.Error(), "timed out") || time.Since(start) > 3*time.Second {
		t.Fatalf("got %v after %s, want a timeout error within 3s", err, time.Since(start))
	}
}

// TestExecEnvironment: the command sees the event's variables.
func TestExecEnvironment(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	h := &Hook{Exec: `printf '%s|%s|%s' "$CONFIGPUB_EVENT" "$CONFIGPUB_FILE" "$CONFIGPUB_RELEASE_VERSION" > ` + out}
	if err := h.Run(context.Background(), Event{File: "/etc/app/values.yml", Removed: true, ReleaseVersion: 7}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); string(got) != "removed|/etc/app/values.yml|7" {
		t.Fatalf("got %q, want %q", got, "removed|/etc/app/values.yml|7")
	}
}
