package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/fsfault"
)

// TestFetchOnReadOnlyCacheExitsZeroOnRenewal: a one-shot fetch (a cron
// job) whose --cache-dir is a real tmpfs remounted read-only after the
// first run. A lease renewal of the snapshot --out already holds is
// verified, needs no write against replays (the seen-state file holds its
// sequence and epoch) and leaves --out unchanged: fetch exits 0 and warns
// on stderr that the cache was not updated — also once the lease in the
// cache has run out, when the run starts from the expired last-known-good
// on disk. Every such run exited 1, which a cron job reads as failure.
// What needs the write still exits 1 with --out kept: a renewal raising
// the revocation epoch and a pointer move (SEEN_STATE_UNWRITABLE).
func TestFetchOnReadOnlyCacheExitsZeroOnRenewal(t *testing.T) {
	const lease = 3 * time.Second
	s, key := newFetchServer(t, lease)
	vol := fsfault.New(t, 1<<20)
	outFile := filepath.Join(t.TempDir(), "values.yml")
	args := s.args(t, key, vol.Dir, outFile)
	if out, err := runCLI(args...); err != nil {
		t.Fatalf("first run on a writable cache: %v\n%s", err, out)
	}
	vol.ReadOnly()
	outInfo, err := os.Stat(outFile)
	if err != nil {
		t.Fatal(err)
	}
	renew := func() {
		now := time.Now().UTC()
		s.resign(t, func(m *bundle.DeliveryManifest) {
			m.IssuedAt, m.ValidFrom = now.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)
			m.RefreshAfter, m.ExpiresAt = now.Add(lease/2).Format(time.RFC3339Nano), now.Add(lease).Format(time.RFC3339Nano)
		})
	}
	run := func(name string, wantExit int, wantReason client.Reason) string {
		t.Helper()
		out, err := runCLI(args...)
		if code := exitCode(err); code != wantExit {
			t.Fatalf("%s: exit %d (%v), want %d\n%s", name, code, err, wantExit, out)
		}
		if ev := evidenceOf(t, out); ev.Reason != wantReason {
			t.Fatalf("%s: %s %s (%s), want %s", name, ev.Outcome, ev.Reason, ev.Detail, wantReason)
		}
		fi, err := os.Stat(outFile)
		if err != nil || !fi.ModTime().Equal(outInfo.ModTime()) {
			t.Fatalf("%s: --out removed or rewritten (%v)", name, err)
		}
		return out
	}

	renew()
	out := run("renewal of the held snapshot", exitOK, client.ReasonLeaseRenewed)
	if !strings.Contains(out, "warning:") || !strings.Contains(out, "read-only file system") {
		t.Fatalf("renewal on a read-only cache: no warning naming the write failure\n%s", out)
	}

	renew()
	s.resign(t, func(m *bundle.DeliveryManifest) { m.RevocationEpoch++ })
	run("a renewal raising the revocation epoch", exitRefused, client.ReasonSeenStateUnwritable)
	s.resign(t, func(m *bundle.DeliveryManifest) { m.RevocationEpoch--; m.Sequence++ })
	run("a pointer move", exitRefused, client.ReasonSeenStateUnwritable)
	s.resign(t, func(m *bundle.DeliveryManifest) { m.Sequence-- })

	time.Sleep(time.Until(s.expires.Add(200 * time.Millisecond))) // the lease in the cache has run out
	renew()
	out = run("renewal once the cached lease ran out", exitOK, client.ReasonLeaseRenewed)
	if !strings.Contains(out, "warning:") {
		t.Fatalf("renewal from an expired cache: no warning\n%s", out)
	}
}
