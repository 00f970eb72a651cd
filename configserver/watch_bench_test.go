package configserver_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/benchsize"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
)

var watchN = flag.Int("watch.n", 10000, "BenchmarkWatchers: concurrent watchers, one identity each")

// shortWatchers is BenchmarkWatchers' size under `go test -short` (make
// bench-smoke) unless -watch.n is given: large enough that the RSS per
// watcher is not the noise of a few pages.
const shortWatchers = 1000

// watchServerEnv names the configuration file of a Config Server child
// process started by BenchmarkWatchers (see TestWatchServerProcess).
const watchServerEnv = "CONFIGPUB_WATCH_SERVER_CONFIG"

// watchServerConfig is what the child process needs to serve.
type watchServerConfig struct {
	DatabaseURL string
	TokenKeyDER []byte // PKIX public key verifying the workload tokens
}

// raiseNoFile lifts RLIMIT_NOFILE to its hard limit and returns it.
func raiseNoFile() uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	rl.Cur = rl.Max
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	return rl.Cur
}

// TestWatchServerProcess is not a test: it is the Config Server process
// BenchmarkWatchers measures, run as a child so that its memory is the
// server's alone. It serves until its standard input closes, then shuts
// down gracefully. Without the environment variable it does nothing.
func TestWatchServerProcess(t *testing.T) {
	path := os.Getenv(watchServerEnv)
	if path == "" {
		t.Skip("only run as BenchmarkWatchers' server process")
	}
	raiseNoFile()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg watchServerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(cfg.TokenKeyDER)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := auth.Thumbprint(pub)
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.NewStaticKeys([]auth.Key{{ID: kid, Algorithm: auth.ES256, Public: pub}}),
		auth.Options{Issuer: issuer, Audience: audience})
	if err != nil {
		t.Fatal(err)
	}
	// A shared machine can starve the listener's heartbeat for seconds
	// while 10,000 connections are set up; staleness is not measured here.
	// The server's own timeline of the move (unix nanoseconds): when the
	// first NOTIFY of the burst arrived, when the last of its pointers was
	// current, and when each parked answer was written.
	var tl serverTimeline
	storeOpts := pgstore.Options{StaleAfter: 30 * time.Second,
		Visible: func(burst time.Time, n int) {
			now := time.Now().UnixNano()
			tl.mu.Lock()
			tl.Bursts, tl.Visible = append(tl.Bursts, burst.UnixNano()), append(tl.Visible, now)
			tl.mu.Unlock()
		}}
	poolCfg, err := pgstore.PoolConfig(cfg.DatabaseURL, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), poolCfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.New(pool, storeOpts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = st.Run(ctx) }()
	h := configserver.NewHandler(st, configserver.Options{Verifier: v, WatchAnswered: func(status int, written time.Time) {
		tl.mu.Lock()
		tl.Written = append(tl.Written, written.UnixNano())
		tl.mu.Unlock()
	}})
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("/debug/timeline", func(w http.ResponseWriter, _ *http.Request) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		_ = json.NewEncoder(w).Encode(&tl)
	})
	profiled := false
	mux.HandleFunc("/debug/mem", func(w http.ResponseWriter, _ *http.Request) {
		// WATCH_CPUPROFILE=FILE profiles the server from the second reading
		// (watchers connected) to its shutdown.
		if p := os.Getenv("WATCH_CPUPROFILE"); p != "" {
			if profiled {
				f, _ := os.Create(p)
				_ = pprof.StartCPUProfile(f)
			}
			profiled = true
		}
		// What idle watchers hold: collect, and return freed pages (the
		// transient buffers of connection set-up) to the OS first.
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_ = json.NewEncoder(w).Encode(map[string]uint64{"heapInuse": ms.HeapInuse, "stackInuse": ms.StackInuse,
			"goroutines": uint64(runtime.NumGoroutine())})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	srvCtx, stop := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }()
	// The mux hides the handler's EndWatches from Serve; end the watches
	// the way Serve would, at shutdown.
	go func() { <-srvCtx.Done(); h.(interface{ EndWatches() }).EndWatches() }()
	if err := configserver.Serve(srvCtx, ln, mux, configserver.ServerOptions{}); err != nil {
		t.Error(err)
	}
	pprof.StopCPUProfile()
	cancel()
	<-runDone
	pool.Close()
}

// serverTimeline is the server process's record of a move, in unix
// nanoseconds (one machine: comparable with the benchmark's clock).
type serverTimeline struct {
	mu      sync.Mutex
	Bursts  []int64 // the first NOTIFY of each burst arrived
	Visible []int64 // each burst's pointers became current
	Written []int64 // each parked answer was written
}

// BenchmarkWatchers is part of `make bench`: watchers (-watch.n, 10,000 by
// default) hold GET /configs?wait=60s with their current ETag against one
// Config Server process on loopback, each for its own identity; the
// promoter then activates release 2, moving every pointer in one
// transaction. It reports the time from COMMIT (the first NOTIFY seen by an
// independent LISTEN connection) to each watcher's 200, and the server's
// memory per idle watcher (RSS, and Go heap plus stacks, before and after
// the watchers connect). Bars: p99 <= 1 s, <= 16 KiB per idle watcher.
// Under -short, 1,000 watchers unless -watch.n is given.
func BenchmarkWatchers(b *testing.B) {
	n := benchsize.Flag("watch.n", watchN, shortWatchers)
	if limit := raiseNoFile(); limit < uint64(n)+512 {
		b.Skipf("RLIMIT_NOFILE hard limit %d is too low for %d watchers", limit, n)
	}
	for range b.N {
		runWatchers(b, n)
	}
}

func runWatchers(b *testing.B, n int) {
	ctx := context.Background()
	db := pgtest.New(b)
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	ps, err := promoter.Open(ctx, db.PoolURL(b, db.URLFor(b, "configpub_promoter")), promoter.Options{Signer: signer})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	target := func(i int, rel int64) promoter.Target {
		id := watchIdentity(i)
		body := []byte(fmt.Sprintf("runtimePolicy:\n  host: %s\n  releaseVersion: %d\ngatewayPolicy:\n  routes: [\"/api/v1/items\"]\n", id.Host, rel))
		name := func(parts ...any) string {
			return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(parts...))).String()
		}
		return promoter.Target{Host: id.Host, ServiceID: id.ServiceID, EnvTag: id.EnvTag, Audience: "gateway",
			SnapshotID: name("snap", i, rel), PublicationID: name("pub", rel), PolicySnapshotID: name("pol", i, rel),
			ReleaseVersion: rel, PolicyVersion: rel,
			PolicyDigest: digestOf([]byte(fmt.Sprint("p", i, rel))), ContentDigest: digestOf([]byte(fmt.Sprint("c", i, rel))),
			PropertySetDigest: digestOf([]byte("ps")), ArtifactDigest: digestOf(body), Values: body,
			CreatedAt: now, ValidFrom: now.Add(-time.Hour), ExpiresAt: now.Add(30 * 24 * time.Hour), Changed: true,
			LeaseProfile: "production", Lease: promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute}}
	}
	releases := make([]promoter.ReleaseInput, 2)
	for r := range releases {
		rel := int64(r + 1)
		in := lifecycleRelease(rel)
		for i := range n {
			in.Targets = append(in.Targets, target(i, rel))
		}
		releases[r] = in
	}
	setup := time.Now()
	for _, in := range releases {
		if _, err := ps.RecordAndActivate(ctx, in); err != nil {
			b.Fatalf("release %d: %v", in.ReleaseVersion, err)
		}
	}
	if _, err := ps.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: "prod", ToRelease: 1,
		Actor: "bench", Reason: "watchers wait on release 1"}); err != nil {
		b.Fatal(err)
	}
	b.Logf("setup: %d identities, releases 1 and 2 recorded, back on 1, in %s", n, time.Since(setup).Round(time.Millisecond))

	// The Config Server child process.
	tokenKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&tokenKey.PublicKey)
	if err != nil {
		b.Fatal(err)
	}
	cfgPath := filepath.Join(b.TempDir(), "server.json")
	cfgJSON, _ := json.Marshal(watchServerConfig{DatabaseURL: db.URLFor(b, "configpub_server"), TokenKeyDER: der})
	if err := os.WriteFile(cfgPath, cfgJSON, 0o600); err != nil {
		b.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestWatchServerProcess$", "-test.bench=^$", "-test.count=1")
	child.Env = append(os.Environ(), watchServerEnv+"="+cfgPath)
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	childDone := make(chan error, 1)
	go func() { childDone <- child.Wait() }()
	defer func() {
		stdin.Close()
		select {
		case <-childDone:
		case <-time.After(30 * time.Second):
			_ = child.Process.Kill()
			<-childDone
		}
	}()
	addr := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		b.Fatal("server process did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	base := "http://" + addr
	waitHTTP(b, base+"/readyz", 200, 30*time.Second)

	tokens := make([]string, n)
	for i := range n {
		id := watchIdentity(i)
		if tokens[i], err = auth.Mint(tokenKey, auth.MintOptions{Issuer: issuer, Audience: audience, Host: id.Host,
			ServiceID: id.ServiceID, EnvTag: id.EnvTag, ConfigAudience: "gateway", TTL: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
	before := serverMem(b, base, child.Process.Pid)

	// An independent LISTEN connection marks the COMMIT.
	lconn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer lconn.Close(ctx)
	if _, err := lconn.Exec(ctx, "LISTEN configpub_pointer"); err != nil {
		b.Fatal(err)
	}

	// Connect the watchers, a bounded number of dials at a time.
	got := make([]time.Time, n)
	var failures atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		failures.Add(1)
		firstErr.CompareAndSwap(nil, err.Error())
	}
	conns := make([]net.Conn, n)
	var answered sync.WaitGroup
	sem := make(chan struct{}, 64)
	var dialed sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		dialed.Add(1)
		answered.Add(1)
		go func() {
			defer dialed.Done()
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			<-sem
			if err != nil {
				fail(err)
				answered.Done()
				return
			}
			conns[i] = c
			id := watchIdentity(i)
			fmt.Fprintf(c, "GET %s&wait=60s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIf-None-Match: \"%s\"\r\n\r\n",
				configsPath(id), addr, tokens[i], releases[0].Targets[i].ArtifactDigest)
			go func() {
				defer answered.Done()
				resp, err := http.ReadResponse(bufio.NewReaderSize(c, 2048), nil)
				got[i] = time.Now()
				if err != nil {
					fail(err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != 200 || resp.Header.Get(bundle.HeaderSnapshotID) != releases[1].Targets[i].SnapshotID ||
					string(body) != string(releases[1].Targets[i].Values) {
					fail(fmt.Errorf("watcher %d: got %d snapshot %q (%v), want 200 %s", i, resp.StatusCode,
						resp.Header.Get(bundle.HeaderSnapshotID), err, releases[1].Targets[i].SnapshotID))
				}
			}()
		}()
	}
	dialed.Wait()
	if err := waitWatchers(base, n, 60*time.Second); err != nil {
		b.Fatalf("%v; %d watchers failed (first: %v)", err, failures.Load(), firstErr.Load())
	}
	after := serverMem(b, base, child.Process.Pid)
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d watchers failed before the move (first: %v)", f, firstErr.Load())
	}

	// One transaction moves every pointer; the first NOTIFY an independent
	// listener receives marks its COMMIT.
	notified := make(chan time.Time, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if _, err := lconn.WaitForNotification(wctx); err != nil {
			close(notified)
			return
		}
		notified <- time.Now()
	}()
	cpu0 := processCPUOf(b, child.Process.Pid)
	called := time.Now()
	if _, err := ps.Activate(ctx, promoter.MoveInput{CommandID: uuid.NewString(), EnvTag: "prod", Release: 2,
		Actor: "bench", Reason: "move every pointer"}); err != nil {
		b.Fatal(err)
	}
	returned := time.Now()
	committed, ok := <-notified
	if !ok {
		b.Fatal("no NOTIFY after the activation")
	}
	done := make(chan struct{})
	go func() { answered.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatal("watchers not all answered within 60s of the commit")
	}
	serverCPU := processCPUOf(b, child.Process.Pid) - cpu0
	tl := serverTimelineOf(b, base)
	for deadline := time.Now().Add(5 * time.Second); len(tl.Written) < n && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // the last answers' hooks may run after their clients read them
		tl = serverTimelineOf(b, base)
	}
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d watchers failed (first: %v)", f, firstErr.Load())
	}
	lat := make([]time.Duration, n)
	for i, t := range got {
		lat[i] = max(t.Sub(committed), 0)
	}
	slices.Sort(lat)
	p50, p99, worst := lat[n/2], lat[n*99/100], lat[n-1]
	rssPer := float64(after.rss-before.rss) / float64(n) / 1024
	goPer := float64(after.heap+after.stack-before.heap-before.stack) / float64(n) / 1024
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(rssPer, "rss-KiB/watcher")
	b.ReportMetric(goPer, "heap+stack-KiB/watcher")
	b.ReportMetric(float64(serverCPU.Microseconds())/float64(n), "server-cpu-µs/watcher")
	b.ReportMetric(0, "ns/op")
	b.Logf("%d watchers: COMMIT -> 200 p50 %s, p99 %s, max %s (Activate call took %s)", n,
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond), returned.Sub(called).Round(time.Millisecond))
	load, _ := os.ReadFile("/proc/loadavg")
	b.Logf("server CPU from the move to the last answer: %s (%.0f µs per watcher; load average %s)",
		serverCPU.Round(time.Millisecond), float64(serverCPU.Microseconds())/float64(n), strings.Join(strings.Fields(string(load))[:3], " "))
	if len(tl.Written) != n || len(tl.Visible) == 0 {
		b.Fatalf("server timeline: %d answers written, %d visibility marks; want %d answers", len(tl.Written), len(tl.Visible), n)
	}
	srv := make([]time.Duration, n)
	for i, w := range tl.Written {
		srv[i] = max(time.Duration(w-committed.UnixNano()), 0)
	}
	slices.Sort(srv)
	b.ReportMetric(float64(srv[n*99/100].Microseconds())/1000, "server-p99-ms")
	firstBurst := slices.Max(tl.Bursts)
	for _, t := range tl.Bursts {
		if t >= called.UnixNano() {
			firstBurst = min(firstBurst, t)
		}
	}
	b.Logf("server side: COMMIT -> first NOTIFY received %s, -> every pointer current %s; COMMIT -> answer written p50 %s, p99 %s, max %s",
		time.Duration(firstBurst-committed.UnixNano()).Round(time.Millisecond),
		time.Duration(slices.Max(tl.Visible)-committed.UnixNano()).Round(time.Millisecond),
		srv[n/2].Round(time.Millisecond), srv[n*99/100].Round(time.Millisecond), srv[n-1].Round(time.Millisecond))
	b.Logf("server memory per idle watcher: RSS %.1f KiB (%d -> %d MiB), Go heap+stacks %.1f KiB; goroutines %d -> %d",
		rssPer, before.rss>>20, after.rss>>20, goPer, before.goroutines, after.goroutines)
	if p99 > time.Second {
		b.Errorf("p99 %s exceeds the 1s bar", p99)
	}
	if rssPer > 16 {
		b.Errorf("%.1f KiB RSS per idle watcher exceeds the 16 KiB bar", rssPer)
	}
}

func watchIdentity(i int) bundle.Identity {
	return bundle.Identity{Host: fmt.Sprintf("w%05d.example", i), ServiceID: "gw", EnvTag: "prod"}
}

// memFigures are one reading of the server process's memory.
type memFigures struct{ rss, heap, stack, goroutines uint64 }

// serverMem reads the child's RSS from /proc and its Go heap and stacks
// (after a GC) from its /debug/mem route.
func serverMem(b *testing.B, base string, pid int) memFigures {
	b.Helper()
	resp, err := http.Get(base + "/debug/mem")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]uint64
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		b.Fatal(err)
	}
	f := memFigures{heap: m["heapInuse"], stack: m["stackInuse"], goroutines: m["goroutines"]}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			f.rss = kb << 10
		}
	}
	return f
}

// processCPUOf returns the user+system CPU time of process pid so far.
func processCPUOf(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command: utime and stime are the 12th
	// and 13th, in clock ticks (100 per second on Linux).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func waitHTTP(b *testing.B, url string, want int, d time.Duration) {
	b.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("%s did not answer %d within %s", url, want, d)
}

// waitWatchers waits until the server holds n watch requests (its
// configpub_server_watchers gauge).
func waitWatchers(base string, n int, d time.Duration) error {
	deadline := time.Now().Add(d)
	last := -1
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(raw), "\n") {
				if v, ok := strings.CutPrefix(line, "configpub_server_watchers "); ok {
					f, _ := strconv.ParseFloat(v, 64)
					last = int(f)
				}
			}
			if last == n {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("server holds %d watchers after %s, want %d", last, d, n)
}

// serverTimelineOf reads the server's timeline of the move.
func serverTimelineOf(b *testing.B, base string) *serverTimeline {
	b.Helper()
	resp, err := http.Get(base + "/debug/timeline")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var tl serverTimeline
	if err := json.NewDecoder(resp.Body).Decode(&tl); err != nil {
		b.Fatal(err)
	}
	return &tl
}
