package daemon_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/daemon"
	"github.com/configpub/configpub/internal/pgtest"
)

// TestHeldWatchLatencyLandsInABucket holds a GET /configs?wait=3 for its
// three seconds and checks that configpub_server_request_duration_seconds
// puts it in a finite bucket: watches are held up to five minutes
// (DefaultMaxWait), and buckets ending at 2.5 s put every one in +Inf,
// where no quantile can be read.
func TestHeldWatchLatencyLandsInABucket(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	keys, err := auth.GenerateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	addr := start(t, daemon.Config{DatabaseURL: db.URLFor(t, "configpub_server"), JWKS: keys.JWKS, Issuer: issuer, Audience: audience})
	base := "http://" + addr
	waitStatus(t, http.DefaultClient, base+"/readyz", 200)
	began := time.Now()
	if got := get(t, http.DefaultClient, base+"/configs?host=h1&wait=3", mint(t, keys.PrivateKey, "")); got != http.StatusNotFound {
		t.Fatalf("GET /configs?wait=3: got %d, want 404", got)
	}
	if held := time.Since(began); held < 3*time.Second {
		t.Fatalf("the watch was answered after %s, not held for 3s", held)
	}
	// The server observes a request's latency after its answer is on the
	// wire: read /metrics until the watch is in it.
	var h *dto.Histogram
	for deadline := time.Now().Add(10 * time.Second); h == nil; {
		h = watchLatency(t, base)
		if h == nil {
			if time.Now().After(deadline) {
				t.Fatal("/metrics has no latency of route watch")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var last *dto.Bucket
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			last = b
		}
	}
	if last.GetCumulativeCount() != h.GetSampleCount() {
		t.Fatalf("route watch: %d of %d observations above the largest bucket (le=%g): only +Inf holds a held watch",
			h.GetSampleCount()-last.GetCumulativeCount(), h.GetSampleCount(), last.GetUpperBound())
	}
	if last.GetUpperBound() < 300 {
		t.Errorf("route watch: largest bucket %gs, below the 5-minute longest hold", last.GetUpperBound())
	}
}

// watchLatency is the request-latency histogram of route watch on the
// server at base's /metrics, nil while it has none.
func watchLatency(t *testing.T, base string) *dto.Histogram {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	mf := families["configpub_server_request_duration_seconds"]
	if mf == nil {
		t.Fatal("/metrics has no configpub_server_request_duration_seconds")
	}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && l.GetValue() == "watch" {
				return m.GetHistogram()
			}
		}
	}
	return nil
}
