package configserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/readback"
)

// TestReadbackReadsRuntimesInParallelInOrder: three real runtimes and one
// whose status endpoint is gone, read back with Concurrency 2. The first two
// requests are held until both have arrived, so a readback that read one
// runtime at a time would never see two at once; no more than two are ever
// in flight; the results come back in the order of the targets, the gone
// one reported in its place and counted in the error; each runtime's
// APPLIED and READY receipts are recorded once, and a second readback
// records nothing new.
func TestReadbackReadsRuntimesInParallelInOrder(t *testing.T) {
	t.Parallel()
	r := newRollout(t, rolloutOptions{})
	ctx := context.Background()

	const parallel = 2
	var (
		arrived, inFlight, peak atomic.Int32
		together                = make(chan struct{})
		once                    sync.Once
	)
	gate := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			if a := arrived.Add(1); a == parallel {
				once.Do(func() { close(together) })
			} else if a < parallel {
				select {
				case <-together:
				case <-time.After(10 * time.Second):
					http.Error(w, `{"reason":"NOT_TOGETHER"}`, http.StatusServiceUnavailable)
					return
				}
			}
			if arrived.Load() <= parallel {
				// Long enough for a request beyond the bound to arrive.
				time.Sleep(100 * time.Millisecond)
			}
			next.ServeHTTP(w, req)
		})
	}
	var targets []readback.Target
	for _, rt := range r.runtimes {
		srv := httptest.NewServer(gate(rt.status.Config.Handler))
		t.Cleanup(srv.Close)
		targets = append(targets, readback.Target{Endpoint: srv.URL, Host: rt.id.Host, ServiceID: rt.id.ServiceID, EnvTag: rt.id.EnvTag})
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	goneTarget := readback.Target{Endpoint: gone.URL, Host: r.runtimes[0].id.Host, ServiceID: "com.networknt.agent-gone-1.0.0", EnvTag: "prod"}
	// The gone runtime's answer comes first, while the first runtime's
	// request waits for a second: results in the order they finish would
	// put it first.
	targets = []readback.Target{targets[0], goneTarget, targets[1], targets[2]}

	col, err := readback.NewCollector(readback.Options{Signer: r.ctlKey, Prefetch: true, Now: r.clock.Now, Concurrency: parallel})
	if err != nil {
		t.Fatal(err)
	}
	res, err := readback.Run(ctx, col, r.receipts, targets)
	if want := "1 of 4 targets not recorded: " + goneTarget.Identity().String(); err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("readback: got %v, want %q", err, want)
	}
	if got := peak.Load(); got != parallel {
		t.Fatalf("runtime requests in flight at once: got %d, want %d", got, parallel)
	}
	if len(res) != len(targets) {
		t.Fatalf("results: got %d, want %d", len(res), len(targets))
	}
	for i, want := range targets {
		got := res[i]
		if got.Target != want {
			t.Fatalf("result %d is of %s, want %s (the targets' order)", i, got.Target.Identity(), want.Identity())
		}
		if want == goneTarget {
			if !strings.Contains(got.Error, "unreachable") || got.Recorded != 0 {
				t.Fatalf("result of the gone runtime: got %+v, want unreachable and nothing recorded", got)
			}
			continue
		}
		if got.Error != "" || got.Recorded != 2 || len(got.Receipts) != 2 ||
			got.Receipts[0].Result != bundle.ResultApplied || got.Receipts[1].Result != bundle.ResultReady ||
			got.Receipts[0].Host != want.Host || got.Receipts[0].ServiceID != want.ServiceID {
			t.Fatalf("result %d (%s): got %+v, want its APPLIED and READY receipts recorded", i, want.Identity(), got)
		}
	}
	if n := r.owner(t, `SELECT count(*)::int FROM configpub.runtime_evidence WHERE kind = 'receipt' AND phase = 'candidate' AND outcome = 'READY'`); n != 3 {
		t.Fatalf("READY receipts stored: got %d, want 3", n)
	}

	// Read again (their requests pass the gate now): nothing new.
	again := []readback.Target{targets[3], targets[2], targets[0]}
	res, err = readback.Run(ctx, col, r.receipts, again)
	if err != nil || len(res) != 3 || res[0].Target != again[0] || res[1].Target != again[1] || res[2].Target != again[2] {
		t.Fatalf("second readback: got %+v, %v; want three results in order", res, err)
	}
	for _, x := range res {
		if x.Recorded != 0 {
			t.Fatalf("second readback of %s recorded %d, want 0", x.Target.Identity(), x.Recorded)
		}
	}

	// A readback whose context has ended reads nothing.
	done, cancel := context.WithCancel(ctx)
	cancel()
	res, err = readback.Run(done, col, r.receipts, targets)
	if !errors.Is(err, context.Canceled) || len(res) != 0 {
		t.Fatalf("readback with an ended context: got %d results, %v; want none and context.Canceled", len(res), err)
	}
}

// TestReadbackEachHoldsAFewResultsPerReader: while fn is busy with the
// first result, the readers run ahead by at most a few results each (the
// three runtimes listed 50 times each, concurrency 2), not through every
// target; an error from fn stops the readback and is returned as it is.
func TestReadbackEachHoldsAFewResultsPerReader(t *testing.T) {
	t.Parallel()
	r := newRollout(t, rolloutOptions{})
	var requests atomic.Int32
	var targets []readback.Target
	for _, rt := range r.runtimes {
		next := rt.status.Config.Handler
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			requests.Add(1)
			next.ServeHTTP(w, req)
		}))
		t.Cleanup(srv.Close)
		targets = append(targets, readback.Target{Endpoint: srv.URL, Host: rt.id.Host, ServiceID: rt.id.ServiceID, EnvTag: rt.id.EnvTag})
	}
	var listed []readback.Target
	for i := range 150 {
		listed = append(listed, targets[i%len(targets)])
	}
	const concurrency = 2
	col, err := readback.NewCollector(readback.Options{Signer: r.ctlKey, Now: r.clock.Now, Concurrency: concurrency})
	if err != nil {
		t.Fatal(err)
	}
	enough := errors.New("enough")
	calls := 0
	var ahead int32
	err = readback.Each(context.Background(), col, r.receipts, listed, func(res *readback.Result) error {
		calls++
		if calls == 1 {
			// Let the readers run as far ahead as they may.
			for last := int32(-1); last != requests.Load(); {
				last = requests.Load()
				time.Sleep(200 * time.Millisecond)
			}
			ahead = requests.Load()
		}
		if calls == 5 {
			return enough
		}
		return nil
	})
	if err != enough || calls != 5 {
		t.Fatalf("each: got %v after %d calls, want fn's own error after 5", err, calls)
	}
	if limit := int32(4*concurrency + 2); ahead < concurrency || ahead > limit {
		t.Fatalf("runtimes read while fn held the first result: %d, want %d to %d", ahead, concurrency, limit)
	}
	if n := requests.Load(); n >= int32(len(listed)) {
		t.Fatalf("runtimes read after fn stopped the readback: %d of %d", n, len(listed))
	}
}
