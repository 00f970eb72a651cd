package console

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/benchsize"
	"github.com/configpub/configpub/internal/pgtest"
)

// BenchmarkPageRender10k renders every page of an environment of 10,000
// targets and 50 releases (200 targets changed per release, the last one
// rolled back) with generated data, through the handler over the viewer
// role: cold (every request queries the store) and warm (page data reused
// until the next change notice, as the console serves it; primed with one
// request per page), per page and overall (target: p99 <= 100 ms), and
// the Go process's CPU per page (PostgreSQL's own CPU is not included).
// Under -short (make bench-smoke runs every benchmark once): 1,000 targets,
// 10 releases of 50 changed targets, 5 requests per page.
//
//	go test -run '^$' -bench BenchmarkPageRender10k -benchtime 1x ./console/
func BenchmarkPageRender10k(b *testing.B) {
	g := generated{env: "big", targets: 10000, releases: 50, changed: 200, rollback: true}
	rounds := 30
	if testing.Short() {
		g.targets, g.releases, g.changed, rounds = 1000, 10, 50, 5
	}
	db := pgtest.New(b)
	start := time.Now()
	generate(b, db.Pool(b), g)
	b.Logf("generated %d targets x %d releases in %v", g.targets, g.releases, time.Since(start).Round(time.Millisecond))
	if _, err := db.Pool(b).Exec(context.Background(), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	now := releaseAt(g.releases).Add(time.Hour)
	pool := viewerPool(b, db, true)
	cold, err := New(context.Background(), pool, Options{ShowValues: true, CacheTTL: -1, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	warm, err := New(context.Background(), pool, Options{ShowValues: true, CacheTTL: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	// At full size: releases 50, 25 and before 30; target 4242 (h42.example).
	last, half, tg := g.releases, g.releases/2, g.targets*4242/10000
	mid := releaseAt(half).Add(30 * time.Minute).Format(time.RFC3339)
	host, svc := fmt.Sprintf("h%d.example", tg/100), fmt.Sprintf("svc-%d", tg)
	pages := []string{
		"/", "/env/big", fmt.Sprintf("/env/big?before=%d", g.releases*3/5), fmt.Sprintf("/env/big/releases/%d", last), "/env/big/releases/1",
		fmt.Sprintf("/env/big/releases/%d", half), "/env/big/targets/" + host + "/" + svc, "/env/big/at?t=" + mid,
		"/env/big/at?t=" + mid + "&host=" + host + "&service=" + svc,
		"/api/environments", "/api/environments/big/timeline", fmt.Sprintf("/api/environments/big/releases/%d", last),
	}
	measure := func(name string, h http.Handler, prime bool) ([]time.Duration, time.Duration) {
		var all []time.Duration
		cpu0 := cpuTime()
		for _, p := range pages {
			if prime {
				req := httptest.NewRequest("GET", p, nil)
				req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost:8090"
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
			var ds []time.Duration
			for r := 0; r < rounds; r++ {
				req := httptest.NewRequest("GET", p, nil)
				req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost:8090"
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				ds = append(ds, time.Since(t0))
				if rec.Code != 200 {
					b.Fatalf("GET %s: %d %s", p, rec.Code, rec.Body.String())
				}
			}
			all = append(all, ds...)
			b.Logf("%s %-58s p50 %6.1f ms  p99 %6.1f ms", name, p, ms(pct(ds, 50)), ms(pct(ds, 99)))
		}
		return all, (cpuTime() - cpu0) / time.Duration(len(all))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, ccpu := measure("cold", cold.Handler(), false)
		w, wcpu := measure("warm", warm.Handler(), true)
		b.ReportMetric(ms(ccpu), "cold-go-cpu-ms/page")
		b.ReportMetric(ms(wcpu), "warm-go-cpu-ms/page")
		b.ReportMetric(ms(pct(c, 50)), "cold-p50-ms")
		b.ReportMetric(ms(pct(c, 99)), "cold-p99-ms")
		b.ReportMetric(ms(pct(w, 50)), "warm-p50-ms")
		b.ReportMetric(ms(pct(w, 99)), "warm-p99-ms")
		if p99 := pct(w, 99); p99 > 100*time.Millisecond {
			b.Errorf("page render p99 (data cached between changes) %v over %d targets and %d releases, want <= 100 ms", p99, g.targets, g.releases)
		}
	}
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[min(i, len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuTime is the user+system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLeaseMoments reads the next lease moment of every environment
// (what a console with live clients reads after each burst of
// notifications) over 10,000 current pointers of one environment: one
// scan. Under -short: 1,000.
//
//	go test -run '^$' -bench BenchmarkLeaseMoments -benchtime 20x ./console/
func BenchmarkLeaseMoments(b *testing.B) {
	g := generated{env: "big", targets: 10000, releases: 1}
	if testing.Short() {
		g.targets = 1000
	}
	db := pgtest.New(b)
	generate(b, db.Pool(b), g)
	if _, err := db.Pool(b).Exec(context.Background(), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	now := releaseAt(1).Add(time.Hour)
	c, err := New(context.Background(), viewerPool(b, db, false), Options{Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		m, err := c.rd.LeaseMoments(context.Background(), now)
		if err != nil || m["big"].IsZero() {
			b.Fatalf("lease moments: %v, %v", m, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/read")
}

var diffSearchTargets = flag.Int("console.targets", 20000, "BenchmarkCurrentDiffAndSearch: targets of the generated environment")

// BenchmarkCurrentDiffAndSearch measures, through the JSON API with the
// page cache off (every request queries the store, over the viewer role),
// the release diff against the current release and the target search over
// one environment of -console.targets targets (default 20,000; under
// -short 1,000): three releases each changing a fifth of the targets, the
// last one rolled back, so release 3 against the current release 2 is a
// fifth of them and release 1 against it another fifth. Run it at two sizes
// to see how it grows:
//
//	go test -run '^$' -bench BenchmarkCurrentDiffAndSearch -benchtime 3x ./console/ -args -console.targets=5000
//	go test -run '^$' -bench BenchmarkCurrentDiffAndSearch -benchtime 3x ./console/ -args -console.targets=20000
//
// 2026-12-06, 2 shared cores under a load average of 12–17, two runs each:
// release 1 against the current release 363/100 ms at 5,000 targets and
// 1,013/949 ms at 20,000 (release 3: 211/57 and 617/703 ms); one target by
// its identity 5.4/1.5 and 0.6/1.3 ms, whatever the size.
//
// The list of the diff against the current release sorted the whole
// release's targets, joined to their snapshots, before it dropped the
// unchanged ones (at 20,000 targets; not at the sizes the tests generate):
// the benchmark fails if its plan does so. After the fix, 2 shared cores
// under a load average of 2–8, old and new statement alternated: at 5,000
// targets (two rounds) release 3 against the current release 36/23 →
// 89/26 ms, release 1 48/50 → 71/43 ms (no gain beyond the noise); at
// 20,000 (three rounds) release 3 223/247/237 → 145/94/155 ms, release 1
// 214/271/226 → 322/137/265 ms, release 1 with host=h1 206/241/307 →
// 204/192/250 ms. The list statement alone went from ~160–220 to ~32–46 ms
// at 20,000; the rest of the request is the count (~47 ms), the retired
// identities (~25 ms) and the release's audiences (16–70 ms).
func BenchmarkCurrentDiffAndSearch(b *testing.B) {
	n := benchsize.Flag("console.targets", diffSearchTargets, 1000)
	g := generated{env: "big", targets: n, releases: 3, changed: n / 5, rollback: true}
	db := pgtest.New(b)
	start := time.Now()
	generate(b, db.Pool(b), g)
	b.Logf("generated %d targets x %d releases in %v", g.targets, g.releases, time.Since(start).Round(time.Millisecond))
	if _, err := db.Pool(b).Exec(context.Background(), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	now := releaseAt(g.releases).Add(time.Hour)
	c, err := New(context.Background(), viewerPool(b, db, false), Options{CacheTTL: -1, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	// The list of a diff against the current release compares the two
	// mappings before it joins the changed targets to their snapshots and
	// sorts them: the Sort of its plan (parameters bound, as the console's
	// first executions plan it) has the mappings' anti join below it. The
	// statement that sorted the whole release first was planned so at
	// 20,000 targets, not at the sizes the tests generate.
	for _, v := range []int64{1, 3} {
		d := ReleaseDetail{Release: Release{EnvTag: "big", Version: v}, Against: AgainstCurrent, AgainstRelease: 2}
		st := diffStatements(&d)
		rows, err := db.Pool(b).Query(context.Background(), "EXPLAIN "+st.list, append(st.args, changedListed, 0)...)
		if err != nil {
			b.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		p := strings.Join(lines, "\n")
		if sort := planNode(p, "Sort Key: s.audience, s.host, s.service_id"); !strings.Contains(sort, "Anti Join") {
			b.Errorf("release %d against the current release: the targets are sorted before the unchanged ones are dropped:\n%s", v, p)
		}
	}
	h := c.Handler()
	tg := n * 4242 / 10000
	for _, bc := range []struct{ name, path string }{
		{"diff-current/release-3", "/api/environments/big/releases/3?against=current"},
		{"diff-current/release-1", "/api/environments/big/releases/1?against=current"},
		{"diff-current/release-1/host-prefix", "/api/environments/big/releases/1?against=current&host=h1"},
		{"diff-base/release-3/host-prefix", "/api/environments/big/releases/3?host=h1"},
		{"search/one-identity", fmt.Sprintf("/api/targets?q=h%d.example/svc-%d", tg/100, tg)},
		{"search/service-prefix", fmt.Sprintf("/api/targets?q=svc-%d&env=big", tg/10)},
		{"search/host-prefix-first-page", "/api/targets?q=h1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				req := httptest.NewRequest("GET", bc.path, nil)
				req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost:8090"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatalf("GET %s: %d %s", bc.path, rec.Code, rec.Body.String())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/req")
		})
	}
}
