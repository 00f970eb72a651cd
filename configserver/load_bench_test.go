package configserver_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/benchsize"
)

var (
	loadDuration    = flag.Duration("load.duration", 5*time.Second, "BenchmarkServerLoad: measured duration of each case")
	loadConcurrency = flag.Int("load.concurrency", 32, "BenchmarkServerLoad: concurrent keep-alive clients")
	loadIdentities  = flag.Int("load.identities", 1000, "BenchmarkServerLoad: identities, each with its own token and snapshot")
	loadProfile     = flag.String("load.cpuprofile", "", "BenchmarkServerLoad: write a CPU profile of each case's last round to PREFIX-<case>.pprof")
	loadHeaders     = flag.Bool("load.headers-baseline", false, "BenchmarkServerLoad: also measure (for information) a baseline that sends the server's full header set from memory")
	loadRounds      = flag.Int("load.rounds", 5, "BenchmarkServerLoad: interleaved rounds the duration is split into")
)

// loadTarget is one identity as the load generator addresses it.
type loadTarget struct {
	path  string // /configs?host=...
	token string
	etag  string
	body  []byte
	hdr   http.Header // the server's response headers (for the headers baseline)
}

// loadResult is what fixed-duration runs measured.
type loadResult struct {
	lat     []time.Duration // every request's latency
	elapsed time.Duration
	cpu     time.Duration // process CPU (user+system) spent, client and server
}

func (r *loadResult) add(o loadResult) {
	r.lat = append(r.lat, o.lat...)
	r.elapsed += o.elapsed
	r.cpu += o.cpu
}

// cpuPerRequest is the process CPU time (load generator and server
// together) per request: unlike req/s it does not depend on how much of the
// shared machine other processes took.
func (r *loadResult) cpuPerRequest() time.Duration { return r.cpu / time.Duration(len(r.lat)) }

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r *loadResult) rps() float64 { return float64(len(r.lat)) / r.elapsed.Seconds() }

func (r *loadResult) quantile(q int) time.Duration {
	slices.Sort(r.lat)
	return r.lat[len(r.lat)*q/100]
}

// runLoad drives base with conc keep-alive clients for d, cycling through
// targets; conditional sends If-None-Match with each target's ETag. Every
// response must have wantStatus (and, for 200, exactly the target's bytes).
func runLoad(b *testing.B, base string, targets []loadTarget, conc int, d time.Duration, conditional bool) loadResult {
	b.Helper()
	wantStatus := http.StatusOK
	if conditional {
		wantStatus = http.StatusNotModified
	}
	tr := &http.Transport{MaxIdleConns: conc, MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	deadline := time.Now().Add(d)
	lat := make([][]time.Duration, conc)
	var failures atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1<<16)
			for i := w; time.Now().Before(deadline); i += conc {
				tg := &targets[i%len(targets)]
				req, _ := http.NewRequest(http.MethodGet, base+tg.path, nil)
				req.Header.Set("Authorization", "Bearer "+tg.token)
				if conditional {
					req.Header.Set("If-None-Match", tg.etag)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				if resp.StatusCode != wantStatus || (wantStatus == 200 && int(n) != len(tg.body)) {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d, %d bytes", resp.StatusCode, n))
				}
			}
			lat[w] = mine
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d failed requests (first: %v)", f, firstErr.Load())
	}
	all := slices.Concat(lat...)
	if len(all) == 0 {
		b.Fatal("no requests completed")
	}
	return loadResult{lat: all, elapsed: elapsed, cpu: cpu}
}

// baselineHandler is the in-run baseline: the same bytes from memory, a
// bare ETag comparison, no authentication, store, logging or metrics.
func baselineHandler(targets []loadTarget) http.Handler {
	byHost := make(map[string]*loadTarget, len(targets))
	for i := range targets {
		host := strings.TrimPrefix(strings.SplitN(targets[i].path, "&", 2)[0], "/configs?host=")
		byHost[host] = &targets[i]
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg := byHost[r.URL.Query().Get("host")]
		if tg == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("ETag", tg.etag)
		if r.Header.Get("If-None-Match") == tg.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(tg.body)
	})
}

// countingListener counts accepted connections (keep-alive must hold).
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// headersBaselineHandler is baselineHandler sending every header the
// server sends for the target (copied from a real response), to show how
// much of the gap is the contract's header volume rather than the checks.
func headersBaselineHandler(targets []loadTarget) http.Handler {
	byHost := make(map[string]*loadTarget, len(targets))
	for i := range targets {
		host := strings.TrimPrefix(strings.SplitN(targets[i].path, "&", 2)[0], "/configs?host=")
		byHost[host] = &targets[i]
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg := byHost[r.URL.Query().Get("host")]
		if tg == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		h := w.Header()
		for k, v := range tg.hdr {
			h[k] = v
		}
		if r.Header.Get("If-None-Match") == tg.etag {
			h.Del("Content-Type")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(tg.body)
	})
}

func serveOn(b *testing.B, h http.Handler, accepted *atomic.Int64) string {
	b.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ln := countingListener{Listener: inner, n: accepted}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- configserver.Serve(ctx, ln, h, configserver.ServerOptions{}) }()
	b.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}

// BenchmarkServerLoad is `make bench-server`: a bounded load generator on
// loopback against the full Config Server (JWT on every request with the
// verified-token cache, PostgreSQL store with in-memory pointers, access log
// to a JSON handler, metrics) for many identities, and, in the same run, a
// minimal net/http server returning the same bytes from memory. Each case
// runs for -load.duration; run it with -benchtime=1x. Under -short (make
// bench-smoke), 100 identities and 500ms per case in 2 rounds, each unless
// its flag is given.
func BenchmarkServerLoad(b *testing.B) {
	n := benchsize.Flag("load.identities", loadIdentities, 100)
	duration := benchsize.Flag("load.duration", loadDuration, 500*time.Millisecond)
	rounds := benchsize.Flag("load.rounds", loadRounds, 2)
	e := newBenchEnv(b)
	samples := goldenBodies(b)
	targets := make([]loadTarget, n)
	for i := range n {
		id := bundle.Identity{Host: fmt.Sprintf("host-%04d.example", i), ServiceID: fmt.Sprintf("svc-%d", i%7), EnvTag: "prod"}
		// A real compiled values.yml, made unique per identity.
		body := append(append([]byte{}, samples[i%len(samples)]...), fmt.Sprintf("# identity %d\n", i)...)
		sn := e.seed.publish(b, id, "gateway", 1, body)
		e.seed.move(b, sn)
		targets[i] = loadTarget{path: configsPath(id), token: e.token(b, id, "gateway"), etag: `"` + sn.ArtifactDigest + `"`, body: body}
	}
	waitServedB(b, e, targets[n-1])
	var serverConns, baselineConns atomic.Int64
	server := serveOn(b, e.handler, &serverConns)
	baseline := serveOn(b, baselineHandler(targets), &baselineConns)
	// Warm the server: every identity once (fills the token and artifact caches).
	for i := range targets {
		req, _ := http.NewRequest("GET", server+targets[i].path, nil)
		req.Header.Set("Authorization", "Bearer "+targets[i].token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("warm-up %s: %v %v", targets[i].path, err, resp)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		targets[i].hdr = resp.Header.Clone()
		targets[i].hdr.Del("Date")
		targets[i].hdr.Del("Content-Length")
	}
	// The cases run interleaved, round by round, so background load on a
	// shared machine affects the server and its baseline alike.
	cases := []struct {
		name        string
		base        string
		conditional bool
	}{
		{"baseline-200", baseline, false},
		{"server-200", server, false},
		{"baseline-304", baseline, true},
		{"server-304", server, true},
	}
	if *loadHeaders {
		var hdrConns atomic.Int64
		withHeaders := serveOn(b, headersBaselineHandler(targets), &hdrConns)
		cases = append(cases, []struct {
			name        string
			base        string
			conditional bool
		}{{"headers-baseline-200", withHeaders, false}, {"headers-baseline-304", withHeaders, true}}...)
	}
	results := map[string]*loadResult{}
	for _, c := range cases {
		results[c.name] = &loadResult{}
	}
	slice := duration / time.Duration(rounds)
	for round := range rounds {
		for _, c := range cases {
			stop := func() {}
			if *loadProfile != "" && round == rounds-1 {
				stop = startProfile(b, *loadProfile+"-"+c.name+".pprof")
			}
			results[c.name].add(runLoad(b, c.base, targets, *loadConcurrency, slice, c.conditional))
			stop()
		}
	}
	for _, c := range cases {
		r := results[c.name]
		b.Run(c.name, func(b *testing.B) {
			b.ReportMetric(r.rps(), "req/s")
			b.ReportMetric(float64(r.quantile(50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(r.quantile(99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(r.cpuPerRequest().Nanoseconds())/1e3, "cpu-µs/req")
			b.ReportMetric(0, "ns/op")
		})
	}
	for _, kind := range []string{"200", "304"} {
		if hb := results["headers-baseline-"+kind]; hb != nil {
			b.Logf("%s (information): a baseline sending the server's full header set from memory does %.0f req/s (%s CPU/req)",
				kind, hb.rps(), hb.cpuPerRequest())
		}
		base, srv := results["baseline-"+kind], results["server-"+kind]
		ratio := srv.rps() / base.rps()
		cpuRatio := float64(base.cpuPerRequest()) / float64(srv.cpuPerRequest())
		verdict := "meets the 0.5x bar"
		if ratio < 0.5 {
			verdict = "BELOW the 0.5x bar"
		}
		b.Logf("%s: server %.0f req/s (p50 %s, p99 %s, %s CPU/req) vs baseline %.0f req/s (p50 %s, p99 %s, %s CPU/req): "+
			"req/s ratio %.2f (%s); CPU-per-request ratio %.2f",
			kind, srv.rps(), srv.quantile(50), srv.quantile(99), srv.cpuPerRequest(),
			base.rps(), base.quantile(50), base.quantile(99), base.cpuPerRequest(), ratio, verdict, cpuRatio)
	}
	hits, verifications := e.verifier.CacheStats()
	b.Logf("connections accepted: server %d, baseline %d; tokens from cache %d, fully verified %d",
		serverConns.Load(), baselineConns.Load(), hits, verifications)
	st := e.store.Stats()
	b.Logf("identities %d (bodies %d..%d bytes), concurrency %d, %s per case in %d interleaved rounds, artifact cache hits %d misses %d",
		n, minLen(samples), maxLen(samples), *loadConcurrency, duration, rounds, st.ArtifactCacheHits, st.ArtifactCacheMisses)
}

// goldenBodies returns the compiled values.yml files of the prod golden
// fixtures (2.7 to 6 KiB each), or synthetic documents when absent.
func goldenBodies(b *testing.B) [][]byte {
	paths, _ := filepath.Glob("../fixtures/golden/prod/*/*/values.yml")
	var out [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, data)
	}
	if len(out) == 0 {
		b.Log("no golden values.yml fixtures; using synthetic bodies")
		out = [][]byte{benchBody(0), benchBody(1)}
	}
	return out
}

// benchBody is a values.yml-sized document unique to identity i.
func benchBody(i int) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "schemaVersion: 1\nhost: host-%04d.example\ngatewayPolicy:\n  routes:\n", i)
	for r := 0; r < 24; r++ {
		fmt.Fprintf(&sb, "    - path: /api/v%d/resource-%d\n      methods: [GET, POST]\n      rateLimit: %d\n", r%3+1, r, 100+i%50)
	}
	return []byte(sb.String())
}

func waitServedB(b *testing.B, e *env, tg loadTarget) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest("HEAD", e.srv.URL+tg.path, nil)
		req.Header.Set("Authorization", "Bearer "+tg.token)
		if resp, err := e.srv.Client().Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatal("seeded identities not served within 10s")
}

// newBenchEnv is newEnv for a benchmark: access logs go to a JSON handler
// writing to io.Discard, so their formatting cost is measured.
func newBenchEnv(b *testing.B) *env {
	b.Helper()
	return newEnvTB(b, envOptions{handler: configserver.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}})
}

func minLen(bs [][]byte) int {
	m := len(bs[0])
	for _, b := range bs {
		m = min(m, len(b))
	}
	return m
}

func maxLen(bs [][]byte) int {
	m := 0
	for _, b := range bs {
		m = max(m, len(b))
	}
	return m
}

func startProfile(b *testing.B, path string) func() {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
