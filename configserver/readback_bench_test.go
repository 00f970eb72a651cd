package configserver_test

import (
	"context"
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/benchsize"
	"github.com/configpub/configpub/readback"
)

var (
	readbackReads  = flag.Int("readback.reads", 3000, "BenchmarkReadback: runtime reads per readback (the three golden runtimes in turn)")
	readbackRounds = flag.Int("readback.rounds", 3, "BenchmarkReadback: interleaved rounds per case")
)

// BenchmarkReadback reads the three golden runtimes' status endpoints (GET
// /status) and asks them to prefetch a staged candidate (POST /prefetch,
// which fetches and verifies it from the Config Server), recording the
// receipts in PostgreSQL, one runtime at a time (concurrency 1, the
// baseline: what readback did before) and eight at once. Each readback
// lists the three runtimes over and over; after the first, every receipt
// is already recorded, so each read costs the request, the control token,
// the runtime's answer and the store's duplicate check. The cases run
// interleaved, round by round. Everything is on loopback: a network's
// round trips would widen the gap, not narrow it.
func BenchmarkReadback(b *testing.B) {
	reads := benchsize.Flag("readback.reads", readbackReads, 300)
	rounds := benchsize.Flag("readback.rounds", readbackRounds, 1)
	r := newRollout(b, rolloutOptions{})
	ctx := context.Background()
	targets := make([]readback.Target, reads)
	for i := range targets {
		rt := r.runtimes[i%len(r.runtimes)]
		targets[i] = readback.Target{Endpoint: rt.status.URL, Host: rt.id.Host, ServiceID: rt.id.ServiceID, EnvTag: rt.id.EnvTag}
	}
	type kase struct {
		name     string
		prefetch bool
		conc     int
		col      *readback.Collector
		took     time.Duration
	}
	var cases []*kase
	for _, prefetch := range []bool{false, true} {
		for _, conc := range []int{1, readback.DefaultConcurrency} {
			name := "status"
			if prefetch {
				name = "prefetch"
			}
			col, err := readback.NewCollector(readback.Options{Signer: r.ctlKey, Prefetch: prefetch, Now: r.clock.Now, Concurrency: conc})
			if err != nil {
				b.Fatal(err)
			}
			cases = append(cases, &kase{name: name, prefetch: prefetch, conc: conc, col: col})
		}
	}
	for _, c := range cases {
		if _, err := readback.Run(ctx, c.col, r.receipts, targets[:len(r.runtimes)]); err != nil {
			b.Fatalf("warm-up %s: %v", c.name, err)
		}
	}
	for range rounds {
		for _, c := range cases {
			start := time.Now()
			res, err := readback.Run(ctx, c.col, r.receipts, targets)
			c.took += time.Since(start)
			if err != nil || len(res) != reads {
				b.Fatalf("%s, concurrency %d: %d results, %v", c.name, c.conc, len(res), err)
			}
			for _, x := range res {
				if x.Recorded != 0 {
					b.Fatalf("%s: recorded %d receipts of %s again", c.name, x.Recorded, x.Target.Identity())
				}
			}
		}
	}
	per := func(c *kase) time.Duration { return c.took / time.Duration(rounds*reads) }
	for i, c := range cases {
		b.Run(c.name+"-concurrency-"+strconv.Itoa(c.conc), func(b *testing.B) {
			b.ReportMetric(float64(per(c).Microseconds()), "µs/read")
			b.ReportMetric(float64(reads)/(c.took.Seconds()/float64(rounds)), "reads/s")
			b.ReportMetric(0, "ns/op")
		})
		if i%2 == 1 {
			base := cases[i-1]
			b.Logf("%s: %d reads in %s at concurrency %d vs %s one at a time: %.2fx the time (%s vs %s per read)",
				c.name, reads, c.took/time.Duration(rounds), c.conc, base.took/time.Duration(rounds),
				float64(c.took)/float64(base.took), per(c), per(base))
		}
	}
}
