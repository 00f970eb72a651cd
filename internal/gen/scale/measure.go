package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// measured is one child run.
type measured struct {
	wall   time.Duration
	maxRSS int64 // bytes
	out    string
}

// measure runs this program again as "-child args..." and returns its wall
// time, maximum resident set size (the child's own peak, reportPeakRSS)
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
	rss, ok := parsePeakRSS(errb.String())
	if !ok {
		return measured{}, fmt.Errorf("%s: the child did not report its peak RSS (%s): %s", strings.Join(args, " "), peakRSSPrefix, tail(errb.String(), 500))
	}
	return measured{wall: wall, maxRSS: rss, out: strings.TrimSpace(out.String())}, nil
}

// peakRSSPrefix starts the line a child writes last on its standard error:
// its peak resident set size in KiB.
const peakRSSPrefix = "scale-child-peak-rss-kib "

// reportPeakRSS writes this process's peak resident set size (VmHWM of
// /proc/self/status, Linux) as the child's last line. The kernel's
// accounting of a child (wait4's ru_maxrss) cannot be used: Go starts a
// child with vfork semantics (CLONE_VM), and exec records the parent's
// high-water mark as the child's, so every child would report at least this
// harness's own peak (300 MiB for /bin/true run by a process that touched
// 300 MiB). VmHWM belongs to the child's own address space, as
// /usr/bin/time's %M does for a child it forks.
func reportPeakRSS(w io.Writer) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				fmt.Fprintf(w, "%s%s\n", peakRSSPrefix, f[0])
			}
			return
		}
	}
}

// parsePeakRSS returns the peak RSS a child reported (reportPeakRSS), in
// bytes.
func parsePeakRSS(stderr string) (int64, bool) {
	i := strings.LastIndex(stderr, peakRSSPrefix)
	if i < 0 {
		return 0, false
	}
	v, _, _ := strings.Cut(stderr[i+len(peakRSSPrefix):], "\n")
	kib, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, false
	}
	return kib * 1024, true
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

// touchChild allocates and writes args[0] MiB and keeps it until it
// returns: a child whose peak resident set size is known (the measurement's
// own test).
func touchChild(args []string) error {
	if len(args) != 1 {
		return errors.New("touch: want MIB")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 0 {
		return fmt.Errorf("touch: %q is not a number of MiB", args[0])
	}
	b := make([]byte, n<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	return nil
}
