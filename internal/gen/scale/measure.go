package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// measured is one child run.
type measured struct {
	wall   time.Duration
	maxRSS int64 // bytes
	out    string
}

// measure runs this program again as "-child args..." and returns its wall
// time, maximum resident set size (the kernel's accounting of that child)
// and standard output.
func measure(ctx context.Context, args ...string) (measured, error) {
	return measureWith(ctx, nil, args...)
}

// measureWith is measure with env added to the child's environment.
func measureWith(ctx context.Context, env []string, args ...string) (measured, error) {
	self, err := os.Executable()
	if err != nil {
		return measured{}, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"-child"}, args...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err = cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return measured{}, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return measured{wall: wall, maxRSS: maxRSS(cmd), out: strings.TrimSpace(out.String())}, nil
}

func maxRSS(cmd *exec.Cmd) int64 {
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024
	}
	return 0
}

// benchMetrics runs one Go benchmark once (`go test -run ^$ -bench
// ^name$ -benchtime 1x pkg -args args...`) and returns the metrics of its
// result line by unit (for example "p99-ms"), plus its log output for
// figures a benchmark prints with b.Logf.
func benchMetrics(ctx context.Context, pkg, name string, timeout time.Duration, args ...string) (map[string]float64, string, error) {
	goArgs := []string{"test", "-run", "^$", "-bench", "^" + name + "$", "-benchtime", "1x", "-count", "1",
		"-timeout", timeout.String(), "-v", pkg}
	if len(args) > 0 {
		goArgs = append(goArgs, append([]string{"-args"}, args...)...)
	}
	cmd := exec.CommandContext(ctx, goBinary(), goArgs...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, out.String(), fmt.Errorf("go test -bench %s %s: %w: %s", name, pkg, err, tail(out.String(), 1500))
	}
	metrics := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	found := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], name) {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not the result line
		}
		found = true
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
	}
	if !found {
		return nil, out.String(), fmt.Errorf("go test -bench %s %s printed no result line: %s", name, pkg, tail(out.String(), 1500))
	}
	return metrics, out.String(), nil
}

func goBinary() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
func mb(b int64) string  { return fmt.Sprintf("%.2f MB", float64(b)/1e6) }
func secs(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000)
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// ratio is a/b formatted, or "" when b is zero.
func ratio(a, b float64) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1fx", a/b)
}
