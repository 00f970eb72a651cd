// Command scale is `make scale`: for each size (default 1,000, 10,000 and
// 100,000 targets) it generates a policy repository with internal/gen,
// compiles it in a child process (wall time and maximum resident set size
// from the kernel's accounting of that child), writes the sharded release
// manifest and measures its files, then changes one Agent, compiles again
// and counts the release files that changed. Each compile is set against an
// in-run baseline: a child that only reads and hashes every source file
// (the floor of any compile). It prints one table.
//
// Usage: go run ./internal/gen/scale [-sizes 1000,10000,100000] [-dir DIR]
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

const env = "bench"

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		if err := child(os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "scale child:", err)
			os.Exit(1)
		}
		return
	}
	sizes := flag.String("sizes", "1000,10000,100000", "comma-separated target counts")
	dir := flag.String("dir", "", "work directory (default: a temporary directory, removed at the end)")
	flag.Parse()
	if err := run(*sizes, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// child runs one measured step in this process: "compile DIR CREATEDAT"
// compiles and writes the release manifest; "hash DIR" reads and hashes
// every source file.
func child(step string, args []string) error {
	switch step {
	case "compile":
		at, err := time.Parse(time.RFC3339, args[1])
		if err != nil {
			return err
		}
		res, err := compiler.Compile(context.Background(), os.DirFS(args[0]), compiler.Options{EnvTag: env, CreatedAt: at})
		if err != nil {
			return err
		}
		if err := compiler.Write(context.Background(), res, args[0], ""); err != nil {
			return err
		}
		fmt.Printf("%d %d\n", len(res.Targets), res.Manifest.ReleaseVersion)
		return nil
	case "hash":
		h := sha256.New()
		n := 0
		err := filepath.WalkDir(args[0], func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			n++
			_, err = io.Copy(h, f)
			return err
		})
		fmt.Printf("%d %x\n", n, h.Sum(nil)[:4])
		return err
	}
	return fmt.Errorf("unknown step %q", step)
}

// measured is one child run.
type measured struct {
	wall   time.Duration
	maxRSS int64 // bytes
	out    string
}

func measure(args ...string) (measured, error) {
	self, err := os.Executable()
	if err != nil {
		return measured{}, err
	}
	cmd := exec.Command(self, append([]string{"-child"}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err = cmd.Run()
	wall := time.Since(t0)
	if err != nil {
		return measured{}, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	return measured{wall: wall, maxRSS: rss, out: strings.TrimSpace(out.String())}, nil
}

type row struct {
	targets                  int
	compile, recompile, base measured
	files                    int
	total, largest           int64
	changedFiles             int
}

func run(sizes, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "configpub-scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var rows []row
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("size %q: want a positive number", s)
		}
		repo := filepath.Join(dir, strconv.Itoa(n))
		if err := os.RemoveAll(repo); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "scale: %d targets: generating in %s\n", n, repo)
		if err := gen.Write(repo, gen.Options{Targets: n, EnvTag: env}); err != nil {
			return err
		}
		r := row{targets: n}
		if r.base, err = measure("hash", repo); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "scale: %d targets: compile\n", n)
		if r.compile, err = measure("compile", repo, at.Format(time.RFC3339)); err != nil {
			return err
		}
		v1, err := gen.ReleaseFiles(repo)
		if err != nil {
			return err
		}
		r.files = len(v1)
		for _, b := range v1 {
			r.total += int64(len(b))
			r.largest = max(r.largest, int64(len(b)))
		}
		agent := filepath.Join(repo, "agents", "h0000.bench.lightapi.net-a000.yaml")
		b, err := os.ReadFile(agent)
		if err != nil {
			return err
		}
		if err := os.WriteFile(agent, bytes.Replace(b, []byte("temperature: 0.2"), []byte("temperature: 0.3"), 1), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "scale: %d targets: recompile after one Agent changed\n", n)
		if r.recompile, err = measure("compile", repo, at.Add(24*time.Hour).Format(time.RFC3339)); err != nil {
			return err
		}
		v2, err := gen.ReleaseFiles(repo)
		if err != nil {
			return err
		}
		r.changedFiles = len(gen.Changed(v1, v2))
		rows = append(rows, r)
		if err := os.RemoveAll(repo); err != nil {
			return err
		}
	}
	return printTable(rows)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
func mb(b int64) string  { return fmt.Sprintf("%.2f MB", float64(b)/1e6) }

func printTable(rows []row) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "targets\tcompile wall\tcompile max RSS\tbaseline: read+hash sources\tratio\trelease files\ttotal\tlargest file\trecompile, 1 Agent changed\tfiles changed")
	for _, r := range rows {
		ratio := float64(r.compile.wall) / float64(max(r.base.wall, time.Millisecond))
		fmt.Fprintf(w, "%d\t%.1f s\t%s\t%.2f s, %s\t%.0fx\t%d\t%s\t%s\t%.1f s, %s\t%d\n", r.targets,
			r.compile.wall.Seconds(), mib(r.compile.maxRSS), r.base.wall.Seconds(), mib(r.base.maxRSS), ratio,
			r.files, mb(r.total), mb(r.largest), r.recompile.wall.Seconds(), mib(r.recompile.maxRSS), r.changedFiles)
	}
	if len(rows) > 1 {
		a, b := rows[0], rows[len(rows)-1]
		fmt.Fprintf(w, "\nmax RSS %d→%d targets: %.2fx for %.0fx the targets\n", a.targets, b.targets,
			float64(b.compile.maxRSS)/float64(max(a.compile.maxRSS, 1)), float64(b.targets)/float64(a.targets))
	}
	fmt.Fprintln(w, "publish, activation, Config Server start-up and replica watcher: not measured by this version (see make bench-publish and the promoter's Activation10k benchmark)")
	return w.Flush()
}
