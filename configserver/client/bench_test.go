package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
)

// benchRelease is a ~4 KB values.yml served on every request (If-None-Match
// ignored), so each Load runs the full verification.
func benchWorld(b *testing.B) (*world, *release) {
	w := newWorld(b)
	s := w.spec(1)
	s.pad = 3200
	r := w.build(s)
	if n := len(r.Values); n < 3800 || n > 4400 {
		b.Fatalf("values.yml is %d bytes, want about 4 KB", n)
	}
	w.srv.set(r, nil)
	w.srv.mu.Lock()
	w.srv.noCond = true
	w.srv.mu.Unlock()
	return w, r
}

// BenchmarkBaseline is the in-run baseline the issue fixes: one yaml.v3
// Unmarshal of the same 4 KB bytes plus one ECDSA P-256 verify of the
// manifest signature.
func BenchmarkBaseline(b *testing.B) {
	w, r := benchWorld(b)
	sig, err := base64.StdEncoding.DecodeString(r.Signature)
	if err != nil {
		b.Fatal(err)
	}
	pub := w.key.trusted.Key
	b.SetBytes(int64(len(r.Values)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var v map[string]any
		if err := yaml.Unmarshal(r.Values, &v); err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(r.ManifestBytes)
		if !ecdsa.VerifyASN1(pub, sum[:], sig) {
			b.Fatal("signature does not verify")
		}
	}
}

// BenchmarkLoad is a full Load of the 4 KB snapshot from the in-process
// server: HTTP round trip, three digest headers, strict parse, envelope and
// identity checks, JCS contentDigest, manifest signature and fields, headers,
// regression and windows. The bytes and manifest are the current ones, so the
// outcome is UNCHANGED and no last-known-good file is written.
func BenchmarkLoad(b *testing.B) {
	w, r := benchWorld(b)
	c := w.client(func(o *client.Options) { o.CacheDir = "" })
	ctx := context.Background()
	mustLoadB(b, c, client.OutcomeApplied)
	b.SetBytes(int64(len(r.Values)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ev, err := c.Load(ctx)
		if err != nil || ev.Outcome != client.OutcomeUnchanged {
			b.Fatalf("got %s %v, want UNCHANGED", ev.Outcome, err)
		}
	}
}

// BenchmarkLoadApplyPersist is a full Load that applies a renewed manifest
// every time and persists the last-known-good durably (fsync + rename +
// directory fsync): it shows what durability costs on this machine.
func BenchmarkLoadApplyPersist(b *testing.B) {
	w, r := benchWorld(b)
	c := w.client()
	ctx := context.Background()
	mustLoadB(b, c, client.OutcomeApplied)
	n := b.N + 1
	renewals := make([]*release, n)
	for i := range renewals {
		renewals[i] = renew(b, w, r, time.Duration(i+1)*time.Millisecond)
	}
	b.SetBytes(int64(len(r.Values)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.srv.set(renewals[i], nil)
		ev, err := c.Load(ctx)
		if err != nil || ev.Outcome != client.OutcomeApplied {
			b.Fatalf("got %s %s %v, want APPLIED", ev.Outcome, ev.Reason, err)
		}
	}
}

// renew re-signs r's manifest with a later issuedAt (a lease renewal).
func renew(b *testing.B, w *world, r *release, later time.Duration) *release {
	m := r.Manifest
	iss, _ := time.Parse(time.RFC3339, m.IssuedAt)
	m.IssuedAt = iss.Add(later).UTC().Format(time.RFC3339Nano)
	mb, err := m.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	sig, err := signing.SignBlob(w.key.priv, mb)
	if err != nil {
		b.Fatal(err)
	}
	out := *r
	out.Manifest, out.ManifestBytes, out.Signature = m, mb, sig
	return &out
}

func mustLoadB(b *testing.B, c *client.Client, want client.Outcome) {
	b.Helper()
	ev, err := c.Load(context.Background())
	if err != nil || ev.Outcome != want {
		b.Fatalf("got %s %s %v, want %s", ev.Outcome, ev.Reason, err, want)
	}
}

// BenchmarkLoadVsBaseline interleaves, per iteration, one baseline
// operation, one full Load and one bare GET of the same response (no
// verification), so that all three see the same machine load. It reports
// each one's wall ns/op and load/baseline (the bar is <= 2); http-ns/op
// shows how much of a Load is the loopback round trip to the in-process
// server, and cpu-load/baseline compares process CPU time (client and server
// goroutines, GC), which waiting for a core on a busy machine does not
// inflate.
func BenchmarkLoadVsBaseline(b *testing.B) {
	w, r := benchWorld(b)
	c := w.client(func(o *client.Options) { o.CacheDir = "" })
	ctx := context.Background()
	mustLoadB(b, c, client.OutcomeApplied)
	sig, err := base64.StdEncoding.DecodeString(r.Signature)
	if err != nil {
		b.Fatal(err)
	}
	pub := w.key.trusted.Key
	hc := w.srv.Client()
	url := w.srv.URL + "/configs?envTag=prod&host=payments.example&serviceId=agent-42"
	var loadT, baseT, httpT, loadCPU, baseCPU time.Duration
	b.ResetTimer()
	for b.Loop() {
		t, c0 := time.Now(), cpuTime()
		var v map[string]any
		if err := yaml.Unmarshal(r.Values, &v); err != nil {
			b.Fatal(err)
		}
		sum := sha256.Sum256(r.ManifestBytes)
		if !ecdsa.VerifyASN1(pub, sum[:], sig) {
			b.Fatal("signature does not verify")
		}
		baseT, baseCPU = baseT+time.Since(t), baseCPU+cpuTime()-c0

		t, c0 = time.Now(), cpuTime()
		if ev, err := c.Load(ctx); err != nil || ev.Outcome != client.OutcomeUnchanged {
			b.Fatalf("got %s %v, want UNCHANGED", ev.Outcome, err)
		}
		loadT, loadCPU = loadT+time.Since(t), loadCPU+cpuTime()-c0

		t = time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		httpT += time.Since(t)
	}
	n := float64(b.N)
	b.ReportMetric(float64(loadT.Nanoseconds())/n, "load-ns/op")
	b.ReportMetric(float64(baseT.Nanoseconds())/n, "baseline-ns/op")
	b.ReportMetric(float64(httpT.Nanoseconds())/n, "http-ns/op")
	b.ReportMetric(float64(loadT)/float64(baseT), "load/baseline")
	if baseCPU > 0 {
		b.ReportMetric(float64(loadCPU)/float64(baseCPU), "cpu-load/baseline")
	}
}
