// Command scale is `make scale`: for each size (default 1,000, 10,000 and
// 100,000 targets) it generates a policy repository with internal/gen and
// runs each step of the pipeline on it in turn: compile, publish,
// activation, Config Server start-up and watchers. Every step adds rows to
// one table, each row a figure set against an in-run baseline measured on
// the same machine in the same run, so that the ratios mean something on a
// shared machine whose absolute speed varies.
//
// Each step lives in its own file (row_<step>.go) and is one function from
// a prepared size to its rows; a step that fails shows its error in the
// table and the others still run (the exit status is then 1).
//
// Usage: go run ./internal/gen/scale [-sizes 1000,10000,100000] [-steps compile,server] [-dir DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/configpub/configpub/internal/gen"
)

const env = "bench"

// step measures one part of the pipeline at one size. noRepo marks a step
// that does not read the generated repository (it is then not generated
// for a run of only such steps).
type step struct {
	name   string
	run    func(ctx context.Context, s *size) ([]row, error)
	noRepo bool
}

// steps is the table's order. A step may use what an earlier step left in
// the size's work directory (publish reads what compile wrote).
func steps() []step {
	return []step{
		{"compile", compileRows, false},
		{"publish", publishRows, false},
		{"activation", activationRows, false},
		{"server", serverRows, true},
		{"watchers", watcherRows, true},
	}
}

// size is one target count with its generated repository.
type size struct {
	targets int
	dir     string // the size's work directory (removed afterwards)
	repo    string // dir/repo: the generated policy repository

	// figures a step records for the next size; prev holds the previous
	// size's (at prevTargets), for growth rows.
	figures, prev map[string]float64
	prevTargets   int
}

// row is one line of the table: a figure measured at one size against its
// in-run baseline. Baseline and ratio are empty when the figure is a count
// or has a fixed bar instead (named in note).
type row struct {
	figure   string
	value    string
	baseline string // the baseline's figure and what it is
	ratio    string
	note     string
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		if err := child(os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "scale child:", err)
			os.Exit(1)
		}
		reportPeakRSS(os.Stderr)
		return
	}
	sizes := flag.String("sizes", "1000,10000,100000", "comma-separated target counts")
	only := flag.String("steps", "", "comma-separated steps to run (default all: compile,publish,activation,server,watchers)")
	dir := flag.String("dir", "", "work directory (default: a temporary directory, removed at the end)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	failed, err := run(ctx, *sizes, *only, *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// child runs one measured step in this process (see measure).
func child(name string, args []string) error {
	switch name {
	case "compile":
		return compileChild(args)
	case "hash":
		return hashChild(args)
	case "publish":
		return publishChild(args)
	case "touch":
		return touchChild(args)
	}
	return fmt.Errorf("unknown child step %q", name)
}

func run(ctx context.Context, sizes, only, dir string) (failed bool, err error) {
	chosen := steps()
	if only != "" {
		want := strings.Split(only, ",")
		chosen = slices.DeleteFunc(chosen, func(s step) bool { return !slices.Contains(want, s.name) })
		if len(chosen) != len(want) {
			return false, fmt.Errorf("-steps %q: known steps are compile, publish, activation, server, watchers", only)
		}
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "configpub-scale-")
		if err != nil {
			return false, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	type result struct {
		targets int
		step    string
		rows    []row
	}
	var results []result
	var prev *size
	for _, sz := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(sz))
		if err != nil || n <= 0 {
			return false, fmt.Errorf("size %q: want a positive number", sz)
		}
		s := &size{targets: n, dir: filepath.Join(dir, strconv.Itoa(n))}
		s.repo = filepath.Join(s.dir, "repo")
		s.figures = map[string]float64{}
		if prev != nil {
			s.prev, s.prevTargets = prev.figures, prev.targets
		}
		prev = s
		if err := os.RemoveAll(s.dir); err != nil {
			return false, err
		}
		if slices.ContainsFunc(chosen, func(st step) bool { return !st.noRepo }) {
			logf("%d targets: generating in %s", n, s.repo)
			if err := gen.Write(s.repo, gen.Options{Targets: n, EnvTag: env}); err != nil {
				return false, err
			}
		}
		for _, st := range chosen {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			logf("%d targets: %s", n, st.name)
			t0 := time.Now()
			rows, err := st.run(ctx, s)
			if err != nil {
				failed = true
				// The table keeps one line; the whole error (the tail of
				// the child's output) goes to the log as soon as it happens.
				logf("%d targets: %s FAILED: %v", n, st.name, err)
				rows = append(rows, row{figure: st.name, value: "FAILED", note: oneLine(err.Error())})
			}
			logf("%d targets: %s done in %s", n, st.name, time.Since(t0).Round(time.Millisecond))
			results = append(results, result{n, st.name, rows})
		}
		if err := os.RemoveAll(s.dir); err != nil {
			return failed, err
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "targets\tstep\tfigure\tvalue\tin-run baseline\tratio\tnote")
	for _, r := range results {
		for _, x := range r.rows {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.targets, r.step, x.figure, x.value, dash(x.baseline), dash(x.ratio), x.note)
		}
	}
	fmt.Fprintf(w, "\nload average at the end: %s\n", loadAvg())
	return failed, w.Flush()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scale: "+format+"\n", args...)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
