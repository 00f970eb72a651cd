package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/fsfault"
	"github.com/configpub/configpub/internal/syncbuf"
	"github.com/configpub/configpub/readback"
)

// TestFetchMetricsReportWhatOutHolds: the sidecar's --out is on a volume
// that is read-only for real (a tmpfs remounted read-only), so the snapshot
// the client verified and persisted in its cache cannot reach the runtime.
// The status endpoint, /metrics and the printed evidence report what --out
// holds — nothing: no current snapshot, no last-known-good, the snapshot
// REJECTED OUT_UNWRITABLE and counted so — and, once the volume is writable
// and a reload writes it, that snapshot as current and last-known-good.
// Until then the runtime runs nothing, and the status and /metrics say it
// fails closed (they said failedClosed false while the client held a
// verified snapshot --out never received).
// /metrics followed the client's memory (the snapshot current, the load
// APPLIED) and the status and the evidence line named the client's cached
// snapshot as last-known-good, which the runtime could not read.
func TestFetchMetricsReportWhatOutHolds(t *testing.T) {
	s, trustKey := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	ctl, pub := newKeyPEM(t)
	ctlPub := filepath.Join(dir, "control.pub")
	if err := os.WriteFile(ctlPub, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	vol := fsfault.New(t, 1<<20)
	vol.ReadOnly()
	outFile := filepath.Join(vol.Dir, "values.yml")
	addr := freeAddr(t)
	args := append(s.args(t, trustKey, filepath.Join(dir, "cache"), outFile),
		"--watch", "--interval", "1h", "--status-listen", addr, "--control-pub", ctlPub)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout syncbuf.Buffer
	root := newRootCmd()
	root.SetOut(&stdout)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	base := "http://" + addr
	target := readback.Target{Endpoint: base, Host: s.id.Host, ServiceID: s.id.ServiceID, EnvTag: s.id.EnvTag}
	col, err := readback.NewCollector(readback.Options{Signer: ctl})
	if err != nil {
		t.Fatal(err)
	}
	want := s.headers.Get("X-Config-Snapshot-Id")
	deadline := time.Now().Add(15 * time.Second)
	var st *bundle.RuntimeStatus
	for {
		st, err = col.Read(ctx, target)
		if err == nil && st.LastRejected != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar status: got %+v, %v; want %s REJECTED OUT_UNWRITABLE", st, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.Current != nil || st.LastKnownGood != nil || st.LastRejected.SnapshotID != want || st.LastRejected.Reason != "OUT_UNWRITABLE" {
		t.Fatalf("status with --out read-only: current %+v, lastKnownGood %+v, lastRejected %+v; want none, none, %s OUT_UNWRITABLE",
			st.Current, st.LastKnownGood, st.LastRejected, want)
	}
	if !st.FailedClosed {
		t.Fatal("status with --out never written: failedClosed false, but the runtime has no configuration at all")
	}
	m := metricsOf(t, base)
	if !m.has("configpub_runtime_failed_closed{", "} 1") {
		t.Fatal("/metrics with --out never written: configpub_runtime_failed_closed is not 1")
	}
	if got := m.slot("current"); got != "" {
		t.Fatalf("/metrics with --out read-only: current slot %s, which --out does not hold", got)
	}
	if got := m.slot("last_known_good"); got != "" {
		t.Fatalf("/metrics with --out read-only: last_known_good slot %s, which --out does not hold", got)
	}
	if got := m.slot("last_rejected"); !strings.Contains(got, want) || !strings.Contains(got, `reason="OUT_UNWRITABLE"`) {
		t.Fatalf("/metrics with --out read-only: last_rejected %q, want %s OUT_UNWRITABLE", got, want)
	}
	if !m.has(`configpub_runtime_loads_total{`, `outcome="REJECTED"`, `reason="OUT_UNWRITABLE"`) {
		t.Fatal("/metrics with --out read-only: no load counted REJECTED OUT_UNWRITABLE")
	}
	ev := evidenceOf(t, stdout.String())
	if ev.Reason != client.ReasonOutUnwritable || !strings.Contains(ev.Detail, "read-only file system") || ev.CurrentSnapshotID != "" || ev.LastKnownGoodSnapshotID != "" || !ev.FailedClosed {
		t.Fatalf("evidence line with --out read-only: %s %s (%s) current %q lastKnownGood %q failedClosed %v; want OUT_UNWRITABLE (EROFS), neither, failed closed",
			ev.Outcome, ev.Reason, ev.Detail, ev.CurrentSnapshotID, ev.LastKnownGoodSnapshotID, ev.FailedClosed)
	}

	vol.Writable()
	reloader, err := readback.NewCollector(readback.Options{Signer: ctl, Reload: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err = reloader.Read(ctx, target)
	if err != nil || st.Current == nil || st.Current.SnapshotID != want || st.LastKnownGood == nil || st.LastKnownGood.SnapshotID != want || st.FailedClosed {
		t.Fatalf("reload with --out writable: got %+v, %v; want current and last-known-good %s, not failed closed", st, err, want)
	}
	m = metricsOf(t, base)
	if !m.has("configpub_runtime_failed_closed{", "} 0") {
		t.Fatal("/metrics once --out is written: configpub_runtime_failed_closed is not 0")
	}
	if !strings.Contains(m.slot("current"), want) || !strings.Contains(m.slot("last_known_good"), want) {
		t.Fatalf("/metrics once --out is written: current %q, last_known_good %q; want %s", m.slot("current"), m.slot("last_known_good"), want)
	}
	if b, err := os.ReadFile(outFile); err != nil || string(b) != string(s.values) {
		t.Fatalf("--out does not hold the verified values.yml after the reload (%v)", err)
	}
	stopWatch(t, cancel, done)
}

// metrics is a /metrics page, one sample a line.
type metrics []string

func metricsOf(t *testing.T, base string) metrics {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m metrics
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); !strings.HasPrefix(l, "#") {
			m = append(m, l)
		}
	}
	return m
}

// slot returns the configpub_runtime_snapshot_info sample of slot ("" when
// there is none).
func (m metrics) slot(slot string) string {
	for _, l := range m {
		if strings.HasPrefix(l, "configpub_runtime_snapshot_info{") && strings.Contains(l, `slot="`+slot+`"`) {
			return l
		}
	}
	return ""
}

// has reports whether a sample contains every part.
func (m metrics) has(parts ...string) bool {
	for _, l := range m {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
