package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
)

// TestServerDownKeepsLastKnownGoodUntilExpiry: with the server gone the
// runtime keeps its snapshot while now < expiresAt + skew, then fails closed;
// a restarted runtime restores the re-verified file under the same rule.
func TestServerDownKeepsLastKnownGoodUntilExpiry(t *testing.T) {
	w := newWorld(t)
	r1 := w.build(w.spec(1))
	w.srv.set(r1, nil)
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)
	w.srv.Close()

	expires := t0.Add(2 * time.Hour) // manifest lease end; skew 30s
	steps := []struct {
		name       string
		at         time.Time
		failClosed bool
	}{
		{"within the lease", t0.Add(90 * time.Minute), false},
		{"past expiresAt but within skew", expires.Add(29 * time.Second), false},
		{"at expiresAt + skew", expires.Add(30 * time.Second), true},
		{"long after", expires.Add(48 * time.Hour), true},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			w.clock.Advance(st.at.Sub(w.clock.Now()))
			ev, err := c.Load(context.Background())
			if ev.Outcome != client.OutcomeUnavailable || ev.Reason != client.ReasonUnreachable {
				t.Fatalf("got %s %s, want UNAVAILABLE UNREACHABLE", ev.Outcome, ev.Reason)
			}
			if !errors.Is(err, client.ErrUnavailable) {
				t.Fatalf("got %v, want ErrUnavailable", err)
			}
			_, cerr := c.Current()
			if got := errors.Is(cerr, client.ErrExpired); got != st.failClosed {
				t.Fatalf("Current: got %v, want failed closed %v", cerr, st.failClosed)
			}
			if got := errors.Is(err, client.ErrExpired); got != st.failClosed || ev.FailedClosed != st.failClosed {
				t.Fatalf("Load: got %v (failedClosed %v), want ErrExpired %v", err, ev.FailedClosed, st.failClosed)
			}
			if gerr := c.Guard(); (gerr != nil) != st.failClosed {
				t.Fatalf("Guard: got %v, want failed closed %v", gerr, st.failClosed)
			}

			// A restarted runtime (same cache dir, server still down).
			c2 := w.client()
			rev, rerr := c2.Restore(context.Background())
			if st.failClosed {
				if rev.Outcome != client.OutcomeRejected || rev.Reason != client.ReasonExpired || !errors.Is(rerr, client.ErrNoSnapshot) {
					t.Fatalf("restart: got %s %s %v, want REJECTED EXPIRED and no snapshot", rev.Outcome, rev.Reason, rerr)
				}
				return
			}
			if rerr != nil || rev.Outcome != client.OutcomeApplied || rev.Reason != client.ReasonRestored || rev.SnapshotID != r1.Manifest.SnapshotID {
				t.Fatalf("restart: got %+v %v, want RESTORED %s", rev, rerr, r1.Manifest.SnapshotID)
			}
		})
	}
}

func TestLastKnownGoodDamageIsDetected(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, path string, good []byte)
		reason client.Reason
	}{
		{"one byte flipped", func(t *testing.T, path string, good []byte) {
			b := bytes.Clone(good)
			b[len(b)/2] ^= 0x20
			writeRaw(t, path, b)
		}, client.ReasonCacheCorrupt},
		{"truncated", func(t *testing.T, path string, good []byte) {
			writeRaw(t, path, good[:len(good)*2/3])
		}, client.ReasonCacheCorrupt},
		{"empty", func(t *testing.T, path string, good []byte) {
			writeRaw(t, path, nil)
		}, client.ReasonCacheCorrupt},
		{"values rewritten with a consistent checksum", func(t *testing.T, path string, good []byte) {
			// An attacker who rewrites the file and its checksum still
			// cannot forge the signed manifest.
			writeRaw(t, path, rewriteLKG(t, good, "advisor", "attacker"))
		}, client.ReasonDigestMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.srv.set(w.build(w.spec(1)), nil)
			c := w.client()
			mustLoad(t, c, client.OutcomeApplied)
			good := readFile(t, c.CachePath())
			tc.damage(t, c.CachePath(), good)

			c2 := w.client()
			ev, err := c2.Restore(context.Background())
			if ev.Outcome != client.OutcomeRejected || ev.Reason != tc.reason {
				t.Fatalf("got %s %s (%s), want REJECTED %s", ev.Outcome, ev.Reason, ev.Detail, tc.reason)
			}
			if !errors.Is(err, client.ErrRejected) || !errors.Is(err, client.ErrNoSnapshot) {
				t.Fatalf("got %v, want ErrRejected and ErrNoSnapshot", err)
			}
			if _, err := c2.Current(); !errors.Is(err, client.ErrNoSnapshot) {
				t.Fatalf("Current after a damaged file: got %v, want ErrNoSnapshot", err)
			}
			// With the server down, Load never falls back to the damaged file.
			w.srv.Close()
			c3 := w.client()
			if _, err := c3.Load(context.Background()); !errors.Is(err, client.ErrNoSnapshot) {
				t.Fatalf("Load with server down and damaged file: got %v, want ErrNoSnapshot", err)
			}
		})
	}
}

// rewriteLKG replaces old with new in the file's JSON payload (base64 values
// decoded and re-encoded) and fixes the header checksum.
func rewriteLKG(t *testing.T, good []byte, old, new string) []byte {
	t.Helper()
	head, payload, _ := bytes.Cut(good, []byte("\n"))
	var f map[string]any
	if err := jsonUnmarshal(payload, &f); err != nil {
		t.Fatal(err)
	}
	vals := decodeB64(t, f["values"].(string))
	if !bytes.Contains(vals, []byte(old)) {
		t.Fatalf("values do not contain %q", old)
	}
	f["values"] = encodeB64(bytes.ReplaceAll(vals, []byte(old), []byte(new)))
	payload = jsonMarshal(t, f)
	format, _, _ := strings.Cut(string(head), " ")
	return append([]byte(format+" "+digestOf(string(payload))+"\n"), payload...)
}

func writeRaw(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCrashDuringLastKnownGoodWrite: a crash after the temporary file is
// written but before the rename leaves the previous file intact; the next
// start ignores (and removes) the stray temporary file.
func TestCrashDuringLastKnownGoodWrite(t *testing.T) {
	w := newWorld(t)
	r1 := w.build(w.spec(1))
	w.srv.set(r1, nil)
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)
	good := readFile(t, c.CachePath())

	client.SetCrashBeforeRename(c, func() error { return errors.New("simulated crash before rename") })
	r2 := w.build(w.spec(2))
	w.srv.set(r2, nil)
	ev := mustLoad(t, c, client.OutcomeApplied)
	if ev.CacheError == "" {
		t.Fatalf("got no cacheError, want the simulated crash reported")
	}
	if got := readFile(t, c.CachePath()); !bytes.Equal(got, good) {
		t.Fatalf("last-known-good changed by an interrupted write")
	}
	temps, _ := filepath.Glob(filepath.Join(w.dir, ".lkg-*.tmp"))
	if len(temps) != 1 {
		t.Fatalf("stray temporary files: got %d, want 1 (the crash leftover)", len(temps))
	}

	// A truncated temporary file from an earlier crash is never read either.
	writeRaw(t, temps[0], good[:10])
	w.srv.Close()
	c2 := w.client()
	rev, err := c2.Restore(context.Background())
	if err != nil || rev.SnapshotID != r1.Manifest.SnapshotID {
		t.Fatalf("restart after crash: got %+v %v, want release 1 restored", rev, err)
	}
	if temps, _ := filepath.Glob(filepath.Join(w.dir, ".lkg-*.tmp")); len(temps) != 0 {
		t.Fatalf("stray temporary files after restart: got %d, want 0", len(temps))
	}
}

// TestRestoreKeepsSeenStateOfExpiredFile: an authentic but expired file is
// not used, yet its seen sequence still refuses a replay after a restart.
func TestRestoreKeepsSeenStateOfExpiredFile(t *testing.T) {
	w := newWorld(t)
	r1 := w.build(w.spec(1))
	w.srv.set(r1, nil)
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)
	r2 := w.build(w.spec(2))
	w.srv.set(r2, nil)
	mustLoad(t, c, client.OutcomeApplied)

	w.clock.Advance(3 * time.Hour) // both leases over
	old := w.spec(1)
	old.leaseFrom, old.leaseTo = w.clock.Now().Add(-time.Hour), w.clock.Now().Add(time.Hour)
	w.srv.set(w.build(old), nil) // release 1 re-signed later, but sequence 1 < seen 2
	c2 := w.client()
	ev, _ := c2.Load(context.Background())
	if ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonSequenceRegression {
		t.Fatalf("got %s %s, want REJECTED SEQUENCE_REGRESSION", ev.Outcome, ev.Reason)
	}
}

// TestPinnedSnapshotSurvivesAnEpochRaiseThatResignsIt: raising the
// revocation epoch re-signs every current pointer, so a session pinned to
// the snapshot that is still current goes on, under the re-signed
// manifest; a raise that comes with another current snapshot ends it.
func TestPinnedSnapshotSurvivesAnEpochRaiseThatResignsIt(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r2 := w.build(w.spec(2))
	w.srv.set(r2, nil)
	c := w.client()
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	session, err := c.Pin(client.PinOptions{OnRevoke: client.DenyOnRevoke})
	if err != nil {
		t.Fatal(err)
	}
	resigned := w.spec(2)
	resigned.manifestEpoch, resigned.sequence = 4, 3
	w.srv.set(w.build(resigned), nil)
	if ev, err := c.Load(ctx); err != nil || ev.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("load of the re-signed release 2: %+v %v", ev, err)
	}
	if s, err := session.Snapshot(); err != nil || s.Manifest.RevocationEpoch != 4 {
		t.Fatalf("pinned session after an epoch raise re-signed its snapshot: %v, want it standing under epoch 4", err)
	}
	r3 := w.spec(3)
	r3.manifestEpoch, r3.sequence = 5, 4
	w.srv.set(w.build(r3), nil)
	if _, err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := session.Snapshot(); !errors.Is(err, client.ErrPinRevoked) {
		t.Fatalf("pinned session after a raise with another current snapshot: %v, want ErrPinRevoked", err)
	}
}
