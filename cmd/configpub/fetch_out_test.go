package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/readback"
)

// failOut makes every write of out fail with ENOSPC until the test ends or
// the returned function is called (outWriteFault: a full disk cannot be
// had here, and root writes a read-only directory).
func failOut(t *testing.T, out string) (stop func()) {
	t.Helper()
	f := func(path string) error {
		if path == out {
			return &os.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
		}
		return nil
	}
	outWriteFault.Store(&f)
	stop = func() { outWriteFault.CompareAndSwap(&f, nil) }
	t.Cleanup(stop)
	return stop
}

// TestFetchOutUnwritableIsReported: a verified snapshot that cannot be
// written to --out (ENOSPC) is printed and reported REJECTED OUT_UNWRITABLE
// naming the error, and the run that finally writes it reports APPLIED.
// With nothing in --out the runtime has no configuration: the line says
// failedClosed and the run exits 3, as a run failing closed does (it exited
// 1, as if the runtime still had its last-known-good).
// fetch returned on the write error before printing or reporting anything,
// while the client had already persisted the snapshot: the next run found it
// UNCHANGED and reported nothing, so the APPLIED observation was never made.
func TestFetchOutUnwritableIsReported(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	cache, outFile := t.TempDir(), filepath.Join(t.TempDir(), "values.yml")
	args := append(s.args(t, key, cache, outFile), "--report")
	want := s.headers.Get("X-Config-Snapshot-Id")

	stop := failOut(t, outFile)
	out, err := runCLI(args...)
	if code := exitCode(err); code != exitFailClosed {
		t.Fatalf("--out unwritable and empty: exit %d (%v), want 3 (failed closed)\n%s", code, err, out)
	}
	ev := evidenceOf(t, out)
	if ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonOutUnwritable || ev.SnapshotID != want ||
		ev.CurrentSnapshotID != "" || !ev.FailedClosed || !strings.Contains(ev.Detail, "no space left on device") {
		t.Fatalf("--out unwritable: got %s %s snapshot %q current %q detail %q; want REJECTED OUT_UNWRITABLE for %s, nothing current, naming ENOSPC",
			ev.Outcome, ev.Reason, ev.SnapshotID, ev.CurrentSnapshotID, ev.Detail, want)
	}
	if r := s.reported(); len(r) != 1 || r[0].Outcome != "REJECTED" || r[0].Reason != "OUT_UNWRITABLE" || r[0].SnapshotID != want || r[0].CurrentSnapshotID != "" {
		t.Fatalf("reported: got %+v, want one REJECTED OUT_UNWRITABLE for %s", r, want)
	}
	if _, err := os.Stat(outFile); err == nil {
		t.Fatal("--out exists although its write failed")
	}

	stop()
	out, err = runCLI(args...)
	if err != nil {
		t.Fatalf("--out writable again: %v\n%s", err, out)
	}
	if ev := evidenceOf(t, out); ev.Outcome != client.OutcomeApplied || ev.SnapshotID != want || ev.CurrentSnapshotID != want {
		t.Fatalf("--out writable again: got %s %s snapshot %q current %q, want APPLIED %s", ev.Outcome, ev.Reason, ev.SnapshotID, ev.CurrentSnapshotID, want)
	}
	if r := s.reported(); len(r) != 2 || r[1].Outcome != "APPLIED" || r[1].SnapshotID != want || r[1].CurrentSnapshotID != want {
		t.Fatalf("reported: got %+v, want APPLIED %s after the rejection", r, want)
	}
	if b, err := os.ReadFile(outFile); err != nil || string(b) != string(s.values) {
		t.Fatalf("--out does not hold the verified values.yml (%v)", err)
	}
}

// TestFetchOutUnwritableKeepsWhatOutHolds: when --out cannot be written
// but still holds the file an earlier run wrote, its runtime goes on
// reading that file: the run is a refusal (exit 1), not a runtime failing
// closed (exit 3), and --out is left as it was.
func TestFetchOutUnwritableKeepsWhatOutHolds(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	cache, outFile := t.TempDir(), filepath.Join(t.TempDir(), "values.yml")
	old := []byte("earlier: run\n")
	if err := os.WriteFile(outFile, old, 0o644); err != nil {
		t.Fatal(err)
	}
	failOut(t, outFile)
	out, err := runCLI(s.args(t, key, cache, outFile)...)
	if code := exitCode(err); code != exitRefused {
		t.Fatalf("--out unwritable, holding a file: exit %d (%v), want 1\n%s", code, err, out)
	}
	if ev := evidenceOf(t, out); ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonOutUnwritable {
		t.Fatalf("got %s %s, want REJECTED OUT_UNWRITABLE", ev.Outcome, ev.Reason)
	}
	if b, err := os.ReadFile(outFile); err != nil || string(b) != string(old) {
		t.Fatalf("--out: got %q (%v), want what it held, %q", b, err, old)
	}
}

// TestFetchStatusReportsWhatOutHolds: the sidecar's status endpoint reports
// as running what --out holds, never a snapshot it could not write: with
// --out unwritable the control plane reads no current snapshot and the
// snapshot REJECTED OUT_UNWRITABLE; once a reload writes it, it is current.
// The status showed the client's current snapshot, so readback recorded a
// receipt APPLIED for bytes the runtime never received.
func TestFetchStatusReportsWhatOutHolds(t *testing.T) {
	s, trustKey := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	ctl, pub := newKeyPEM(t)
	ctlPub := filepath.Join(dir, "control.pub")
	if err := os.WriteFile(ctlPub, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(dir, "values.yml")
	stop := failOut(t, outFile)
	addr := freeAddr(t)
	args := append(s.args(t, trustKey, filepath.Join(dir, "cache"), outFile),
		"--watch", "--interval", "1h", "--status-listen", addr, "--control-pub", ctlPub)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	target := readback.Target{Endpoint: "http://" + addr, Host: s.id.Host, ServiceID: s.id.ServiceID, EnvTag: s.id.EnvTag}
	col, err := readback.NewCollector(readback.Options{Signer: ctl})
	if err != nil {
		t.Fatal(err)
	}
	want := s.headers.Get("X-Config-Snapshot-Id")
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := col.Read(ctx, target)
		if err == nil && st.LastRejected != nil {
			if st.Current != nil || st.LastRejected.SnapshotID != want || st.LastRejected.Reason != "OUT_UNWRITABLE" ||
				st.LastLoad == nil || st.LastLoad.Reason != "OUT_UNWRITABLE" {
				t.Fatalf("status with --out unwritable: current %+v, lastRejected %+v, lastLoad %+v; want no current, %s REJECTED OUT_UNWRITABLE",
					st.Current, st.LastRejected, st.LastLoad, want)
			}
			break
		}
		if err == nil && st.Current != nil {
			t.Fatalf("status with --out unwritable: current %s, which --out does not hold", st.Current.SnapshotID)
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar status: got %+v, %v; want %s REJECTED OUT_UNWRITABLE", st, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}

	stop()
	reloader, err := readback.NewCollector(readback.Options{Signer: ctl, Reload: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := reloader.Read(ctx, target)
	if err != nil || st.Current == nil || st.Current.SnapshotID != want || st.LastLoad == nil || st.LastLoad.Reason == "OUT_UNWRITABLE" {
		t.Fatalf("reload with --out writable: got %+v, %v; want current %s", st, err, want)
	}
	if b, err := os.ReadFile(outFile); err != nil || string(b) != string(s.values) {
		t.Fatalf("--out does not hold the verified values.yml after the reload (%v)", err)
	}
	stopWatch(t, cancel, done)
}

// TestFetchRemovesStrayOutTemps: the temporary files a fetch killed while
// writing --out left next to it (.values.yml.<digits>.tmp) are removed when
// fetch starts, and nothing else in the directory is. Only the cache
// directory's were: 250 kill -9 loops left 6 beside --out.
func TestFetchRemovesStrayOutTemps(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	outFile := filepath.Join(dir, "values.yml")
	crash := errors.New("killed")
	for range 2 {
		if err := atomicfile.WriteWithHook(outFile, []byte("half"), 0o644, func() error { return crash }); !errors.Is(err, crash) {
			t.Fatalf("simulated kill: %v", err)
		}
	}
	other := filepath.Join(dir, ".values.yml.keep.tmp") // not a name atomicfile gives
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI(s.args(t, key, t.TempDir(), outFile)...); err != nil {
		t.Fatalf("fetch: %v\n%s", err, out)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != ".values.yml.keep.tmp" || names[1] != "values.yml" {
		t.Fatalf("--out's directory holds %v; want only values.yml and .values.yml.keep.tmp", names)
	}
}

// TestFetchOutDirectoryIsRefused: an --out that names a directory is a
// usage error naming it, before anything is loaded, and the directory is
// left alone. A fetch that failed closed (no verified configuration: here
// a Config Server that is down and an empty cache) removed --out, and so
// an empty directory given as --out, and exited 3.
func TestFetchOutDirectoryIsRefused(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	outDir := t.TempDir()
	for _, down := range []bool{false, true} {
		if down {
			s.Close()
		}
		out, err := runCLI(s.args(t, key, t.TempDir(), outDir)...)
		if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), "--out "+outDir+" is a directory") {
			t.Errorf("server down %v: exit %d (%v), want 2 naming --out %s as a directory\n%s", down, code, err, outDir, out)
		}
		if fi, err := os.Stat(outDir); err != nil || !fi.IsDir() {
			t.Fatalf("server down %v: the --out directory is gone (%v)", down, err)
		}
	}
}

// TestFetchServerURLIsChecked: a --server the client could only fail to
// reach is a usage error naming --server (its password masked), before
// anything is loaded, and --out is left as it was. It was taken as given:
// the request failed (a query in it turned /configs into a 404) and the
// fetch failed closed, exit 3, removing --out.
func TestFetchServerURLIsChecked(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	outFile := filepath.Join(t.TempDir(), "values.yml")
	if err := os.WriteFile(outFile, s.values, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ server, want string }{
		{"ht tp://" + strings.TrimPrefix(s.URL, "http://"), "--server: not a URL (first path segment in URL cannot contain colon): want http(s)://HOST"},
		{strings.TrimPrefix(s.URL, "http://"), "--server: not a URL (first path segment in URL cannot contain colon): want http(s)://HOST"},
		{s.URL + "?token=s3cr3t", "--server " + s.URL + "?…: want http(s)://HOST[:PORT][/PATH], without a query or fragment"},
		{"http://u:s3cr3t@" + strings.TrimPrefix(s.URL, "http://") + "/#x", "--server http://u:xxxxx@" + strings.TrimPrefix(s.URL, "http://") + "/?…: want"},
		{"http:///configs", "want http(s)://HOST"},
	} {
		args := s.args(t, key, t.TempDir(), outFile)
		for i, a := range args {
			if a == "--server" {
				args[i+1] = tc.server
			}
		}
		out, err := runCLI(args...)
		if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("--server %q: exit %d (%v), want 2 naming %q\n%s", tc.server, code, err, tc.want, out)
		}
		if strings.Contains(fmt.Sprint(err)+out, "s3cr3t") {
			t.Errorf("--server %q: the secret is echoed: %v", tc.server, err)
		}
		if b, err := os.ReadFile(outFile); err != nil || string(b) != string(s.values) {
			t.Fatalf("--server %q: --out was changed or removed (%v)", tc.server, err)
		}
	}
}

// TestPullOutIsChecked: pull refuses an --out it cannot write — a
// directory, or a file in a directory that does not exist — as a usage
// error naming --out, before it pulls anything (the registry here is not
// even listening). It pulled first and then failed to rename over the
// directory or to create its temporary file, exit 1, naming the temporary.
func TestPullOutIsChecked(t *testing.T) {
	ref := "127.0.0.1:1/policy/dev/h/s@sha256:" + strings.Repeat("0", 64)
	dir := t.TempDir()
	for _, tc := range []struct{ out, want string }{
		{dir, "--out " + dir + " is a directory"},
		{filepath.Join(dir, "nodir", "values.yml"), "--out " + filepath.Join(dir, "nodir", "values.yml") + ": directory " + filepath.Join(dir, "nodir") + " does not exist (pull does not create it)"},
	} {
		out, err := runCLI("pull", ref, "--plain-http", "--out", tc.out)
		if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("--out %s: exit %d (%v), want 2 naming %q\n%s", tc.out, code, err, tc.want, out)
		}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the --out directory is gone (%v)", err)
	}
}

// TestFetchCacheDirFileIsRefused: a --cache-dir that names a regular file
// (a typo) is a usage error naming it, and the runtime's --out is left as
// it was. The load could persist no seen-state, so the fetch failed
// closed, exit 3, and removed --out: the running configuration.
func TestFetchCacheDirFileIsRefused(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	outFile, cacheFile := filepath.Join(dir, "values.yml"), filepath.Join(dir, "cache")
	for _, p := range []string{outFile, cacheFile} {
		if err := os.WriteFile(p, s.values, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCLI(s.args(t, key, cacheFile, outFile)...)
	if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), "--cache-dir "+cacheFile+" is not a directory") {
		t.Errorf("exit %d (%v), want 2 naming --cache-dir\n%s", code, err, out)
	}
	if b, err := os.ReadFile(outFile); err != nil || string(b) != string(s.values) {
		t.Fatalf("--out was changed or removed (%v)", err)
	}
}
