package replica_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/knowledge/replica"
)

// childEnv carries "URL RELEASE" to the re-executed test binary.
const childEnv = "CONFIGPUB_KNOWLEDGE_APPLY_CHILD"

// killGen is the inventory the kill loop materializes: 400 knowledge bases,
// about 2,000 replicas, so that an apply takes long enough for random kill
// points to land inside its transaction while 30 runs stay well under a
// minute on a loaded machine.
var killGen = gen{n: 400}

func killSeq(k int64) int64 { return 10 + k }

// TestApplyChild is the materializing process of TestKillNineMidApply: it
// runs only when re-executed with childEnv set, stages release RELEASE,
// prints "staged" and applies it.
func TestApplyChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("runs only as the child of TestKillNineMidApply")
	}
	url, rel, _ := strings.Cut(spec, " ")
	k, err := strconv.ParseInt(rel, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	snap := killGen.snapshot(t, k, killSeq(k))
	if _, err := replica.Stage(snap); err != nil {
		t.Fatal(err)
	}
	fmt.Println("staged")
	if _, err := replica.New(pool, replica.Options{}).Apply(ctx, snap); err != nil {
		t.Fatal(err)
	}
}

// TestKillNineMidApply re-executes this test binary as a child that
// materializes release c+1 over release c and kills it with SIGKILL at a
// random moment (seeded: CONFIGPUB_CRASH_SEED, default 1;
// CONFIGPUB_KNOWLEDGE_KILL_RUNS runs, default 30): a third anywhere in the
// child's life, the rest within its calibrated apply after it printed
// "staged". After every kill the tables hold exactly release c's replica
// set with release c's applied pointer, or exactly release c+1's with
// c+1's — never a mix.
func TestKillNineMidApply(t *testing.T) {
	if testing.Short() {
		t.Skip("kill loop: re-executes the test binary at least 30 times; skipped under -short")
	}
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	runs := envInt(t, "CONFIGPUB_KNOWLEDGE_KILL_RUNS", 30)
	seed := uint64(envInt(t, "CONFIGPUB_CRASH_SEED", 1))
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	db, _ := newDB(t)
	owner := db.Pool(t)
	url := db.URLFor(t, replica.LoaderRole)
	user := strings.SplitN(strings.TrimPrefix(url, "postgres://"), ":", 2)[0]

	// Release k's expected state, computed once.
	expect := map[int64][]string{}
	want := func(k int64) []string {
		if _, ok := expect[k]; !ok {
			expect[k] = expectedSet(t, killGen, k)
		}
		return expect[k]
	}
	state := func() (int64, []string) {
		waitIdle(t, owner, user)
		s := readTables(t, owner)
		if s.Pointer == "" {
			return 0, s.set()
		}
		f := strings.Fields(s.Pointer)
		rv, _ := strconv.ParseInt(f[2], 10, 64)
		if f[1] != uuidN(3000+rv) || f[3] != strconv.FormatInt(killSeq(rv), 10) || f[4] != strconv.Itoa(len(s.Rows)) {
			t.Fatalf("applied pointer %q does not describe release %d", s.Pointer, rv)
		}
		return rv, s.set()
	}

	// Calibrate: release 1 from nothing, then release 2 over it, timing
	// the child's life and its apply (from "staged" to exit).
	var life, apply time.Duration
	for k := int64(1); k <= 2; k++ {
		c := startChild(t, url, k)
		select {
		case <-c.staged:
		case err := <-c.done:
			t.Fatalf("child exited before staging: %v\n%s", err, c.out())
		}
		marked := time.Now()
		if err := <-c.done; err != nil {
			t.Fatalf("child applying release %d: %v\n%s", k, err, c.out())
		}
		life, apply = time.Since(c.start), time.Since(marked)
		if rv, set := state(); rv != k || !slices.Equal(set, want(k)) {
			t.Fatalf("after an uninterrupted apply of release %d the tables hold release %d", k, rv)
		}
	}
	t.Logf("an uninterrupted child applying release 2 over 1 lived %v, its apply took %v (%d replicas)", life, apply, len(want(2)))

	var atOld, atNew, exited int
	cur := int64(2)
	start := time.Now()
	for i := range runs {
		anywhere := i%3 == 0
		var delay time.Duration
		if anywhere {
			delay = time.Duration(rng.Int64N(int64(life)))
		} else {
			delay = time.Duration(rng.Int64N(int64(apply)))
		}
		next := cur + 1
		c := startChild(t, url, next)
		var timer <-chan time.Time
		if anywhere {
			timer = time.After(delay)
		}
		staged := c.staged
		for done := false; !done; {
			select {
			case <-staged:
				staged = nil
				if !anywhere {
					timer = time.After(delay)
				}
			case <-timer:
				_ = c.cmd.Process.Signal(syscall.SIGKILL)
				<-c.done
				done = true
			case err := <-c.done:
				if err != nil {
					t.Fatalf("run %d: child exited before the kill: %v\n%s", i, err, c.out())
				}
				exited++
				done = true
			}
		}
		rv, set := state()
		switch {
		case rv == cur && slices.Equal(set, want(cur)):
			atOld++
		case rv == next && slices.Equal(set, want(next)):
			atNew++
			cur = next
		default:
			t.Fatalf("seed %d run %d (kill %v after %s): the pointer names release %d with %d replicas, want exactly release %d's or %d's set",
				seed, i, delay, map[bool]string{true: "start", false: "staging"}[anywhere], rv, len(set), cur, next)
		}
	}
	t.Logf("seed %d: %d runs in %v; %d left the old set and pointer, %d the new (%d of them finished before the kill)",
		seed, runs, time.Since(start).Round(time.Millisecond), atOld, atNew, exited)
}

// waitIdle waits until no session of user is left: a killed child's
// backend finishes (and rolls back) before the state is read.
func waitIdle(t *testing.T, q *pgxpool.Pool, user string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := q.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", user).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions of %s still open", n, user)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type child struct {
	cmd    *exec.Cmd
	start  time.Time
	staged chan struct{}
	done   chan error
	buf    *strings.Builder
	lines  chan struct{}
}

func (c *child) out() string {
	<-c.lines
	return c.buf.String()
}

// startChild re-executes the test binary running only TestApplyChild.
func startChild(t *testing.T, url string, k int64) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestApplyChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+url+" "+strconv.FormatInt(k, 10))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	c := &child{cmd: cmd, staged: make(chan struct{}), done: make(chan error, 1), buf: &strings.Builder{}, lines: make(chan struct{})}
	c.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			line := sc.Text()
			c.buf.WriteString(line + "\n")
			if line == "staged" && !once {
				once = true
				close(c.staged)
			}
		}
	}()
	go func() {
		<-c.lines
		c.done <- cmd.Wait()
	}()
	return c
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
