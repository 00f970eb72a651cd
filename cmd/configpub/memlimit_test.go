package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// unsetenv unsets key for the test and restores it after.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "")
	os.Unsetenv(key)
}

// TestSetMemoryLimit: with a container limit the runtime's soft limit is
// 90% of it; GOMEMLIMIT wins, AUTOMEMLIMIT=off turns it off and
// AUTOMEMLIMIT=<ratio> changes the share; no limit, or no cgroup at all,
// changes nothing and is not an error; a limit that cannot be read is.
func TestSetMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	const gib = 1 << 30
	fixed := func(n uint64, err error) memlimit.Provider {
		return func() (uint64, error) { return n, err }
	}
	tests := []struct {
		name      string
		env       map[string]string
		limit     memlimit.Provider
		wantSet   int64 // what setMemoryLimit returns
		wantLimit int64 // the runtime's limit after it (0: unchanged)
		wantErr   bool
	}{
		{name: "container limit", limit: fixed(gib, nil), wantSet: gib * 9 / 10, wantLimit: gib * 9 / 10},
		{name: "GOMEMLIMIT wins", env: map[string]string{"GOMEMLIMIT": "300MiB"}, limit: fixed(gib, nil)},
		{name: "AUTOMEMLIMIT=off", env: map[string]string{"AUTOMEMLIMIT": "off"}, limit: fixed(gib, nil)},
		{name: "AUTOMEMLIMIT share", env: map[string]string{"AUTOMEMLIMIT": "0.5"}, limit: fixed(gib, nil), wantSet: gib / 2, wantLimit: gib / 2},
		{name: "no limit", limit: fixed(0, memlimit.ErrNoLimit)},
		{name: "not in a cgroup", limit: fixed(0, memlimit.ErrNoCgroup)},
		{name: "unreadable limit", limit: fixed(0, errors.New("memory.max: permission denied")), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unsetenv(t, "GOMEMLIMIT")
			unsetenv(t, "AUTOMEMLIMIT")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			const before = 7 << 30
			debug.SetMemoryLimit(before)
			got, err := setMemoryLimit(tt.limit)
			if (err != nil) != tt.wantErr {
				t.Fatalf("setMemoryLimit: %v, want error %v", err, tt.wantErr)
			}
			want := tt.wantLimit
			if want == 0 {
				want = before
			}
			if got != tt.wantSet || memoryLimit() != want {
				t.Errorf("set %d, runtime limit %d; want set %d, limit %d", got, memoryLimit(), tt.wantSet, want)
			}
		})
	}
}

// TestMemoryLimitInARealCgroup builds configpub and runs `configpub version
// -o json` inside a memory cgroup of 512 MiB created for it (cgroup v1 or
// v2; skipped where the machine does not let the test create one): the
// binary set its soft memory limit to 90% of the cgroup's limit, read from
// the real cgroup files, and GOMEMLIMIT still wins there.
func TestMemoryLimitInARealCgroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cgroups are Linux's")
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	cg, limitFile := newMemoryCgroup(t)
	limit := 512 << 20
	if err := os.WriteFile(filepath.Join(cg, limitFile), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Skipf("cannot limit the test cgroup: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "configpub")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(env ...string) int64 {
		t.Helper()
		cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", cg, bin, "version", "-o", "json")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "AUTOMEMLIMIT=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("configpub version in %s: %v\n%s", cg, err, out)
		}
		var v struct {
			MemoryLimit int64 `json:"memoryLimit"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("configpub version -o json: %v\n%s", err, out)
		}
		return v.MemoryLimit
	}
	if got, want := run(), int64(float64(limit)*memoryLimitRatio); got != want {
		t.Errorf("in a %d-byte cgroup: memoryLimit %d, want %d", limit, got, want)
	}
	if got, want := run("GOMEMLIMIT=300MiB"), int64(300<<20); got != want {
		t.Errorf("with GOMEMLIMIT=300MiB: memoryLimit %d, want %d", got, want)
	}
	if got := run("AUTOMEMLIMIT=off"); got != 0 {
		t.Errorf("with AUTOMEMLIMIT=off: memoryLimit %d, want none", got)
	}
}

// newMemoryCgroup creates a memory cgroup for the test (removed after it)
// and returns its directory and the name of its limit file; it skips the
// test when it cannot.
func newMemoryCgroup(t *testing.T) (dir, limitFile string) {
	t.Helper()
	name := fmt.Sprintf("configpub-test-%d", os.Getpid())
	var parent string
	switch {
	case fileExists("/sys/fs/cgroup/cgroup.controllers"): // v2, unified
		parent, limitFile = "/sys/fs/cgroup", "memory.max"
	case fileExists("/sys/fs/cgroup/memory/memory.limit_in_bytes"): // v1
		parent, limitFile = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
	default:
		t.Skip("no memory cgroup hierarchy mounted")
	}
	dir = filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	})
	if !fileExists(filepath.Join(dir, limitFile)) {
		t.Skipf("the cgroup %s has no %s (memory controller not enabled)", dir, limitFile)
	}
	return dir, limitFile
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
