package promote_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/heappeak"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// BenchmarkRepublish measures Republish of a recorded release of 500 and
// of 2,000 targets (4 KB of values each) into an empty registry per
// iteration (`configpub registry serve` in its own process, so that the
// registry's memory is not counted): time per artifact and how far the
// heap rises, which must not grow with the release: the targets stream
// from the store in batches (Options.MoveBatch, 200 here) and at most 8
// are in flight.
func BenchmarkRepublish(b *testing.B) {
	bin := promotertest.BuildConfigpub(b)
	for _, n := range []int{500, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchRepublish(b, bin, n) })
	}
}

// serveRegistry starts `configpub registry serve` on a free port and
// returns its host:port; it is stopped in b.Cleanup.
func serveRegistry(b *testing.B, bin string) string {
	b.Helper()
	cmd := exec.Command(bin, "registry", "serve", "--dir", b.TempDir(), "--addr", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("registry serve: %v", err)
	}
	_, rest, _ := strings.Cut(line, "http://")
	host, _, _ := strings.Cut(rest, " ")
	return host
}

func benchRepublish(b *testing.B, bin string, n int) {
	ctx := context.Background()
	db := pgtest.New(b)
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		b.Fatal(err)
	}
	signer, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte("pw"))
	if err != nil {
		b.Fatal(err)
	}
	// Batches of 200 targets (the default, 2,000, would hold a whole
	// release of either size in one batch).
	store, err := promoter.Open(ctx, db.Pool(b), promoter.Options{Signer: signer, MoveBatch: 200})
	if err != nil {
		b.Fatal(err)
	}
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	in := promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "bench", ReleaseVersion: 1, ManifestBytes: []byte("release 1"),
		Actor: "bench", Reason: "bench"}
	digestOf := func(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }
	for i := range n {
		host := fmt.Sprintf("host-%05d", i)
		values := []byte(fmt.Sprintf("host: %s\n#%s\n", host, strings.Repeat("x", 4096)))
		t := promoter.Target{Host: host, ServiceID: "svc", EnvTag: "bench", Audience: "gateway",
			SnapshotID:       uuid.NewSHA1(uuid.NameSpaceURL, []byte(host)).String(),
			PublicationID:    uuid.NewSHA1(uuid.NameSpaceURL, []byte("pub")).String(),
			PolicySnapshotID: uuid.NewSHA1(uuid.NameSpaceURL, []byte("pol"+host)).String(),
			ReleaseVersion:   1, PolicyVersion: 1,
			PolicyDigest: digestOf([]byte("p" + host)), ContentDigest: digestOf([]byte("c" + host)),
			PropertySetDigest: digestOf([]byte("ps")), ArtifactDigest: digestOf(values), Values: values,
			CreatedAt: now, ValidFrom: now.Add(-time.Hour), ExpiresAt: now.Add(24 * time.Hour),
			Lease: promoter.LeaseWindow{RefreshAfter: time.Minute, ExpiresAfter: time.Hour}}
		a := registry.Artifact{Host: host, ServiceID: "svc", EnvTag: "bench", Audience: "gateway", SnapshotID: t.SnapshotID,
			PublicationID: t.PublicationID, PolicyDigest: t.PolicyDigest, ContentDigest: t.ContentDigest, ArtifactDigest: t.ArtifactDigest,
			ReleaseVersion: 1, CreatedAt: now, Values: values}
		d, err := registry.ManifestDigest(a)
		if err != nil {
			b.Fatal(err)
		}
		t.OCIManifestDigest = d.String()
		in.Targets = append(in.Targets, t)
	}
	if _, err := store.RecordAndActivate(ctx, in); err != nil {
		b.Fatal(err)
	}
	in = promoter.ReleaseInput{}
	var rise uint64
	var took time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		host := serveRegistry(b, bin)
		b.StartTimer()
		start := time.Now()
		rise = max(rise, heappeak.Rise(func() {
			res, err := promote.Republish(ctx, promote.RepublishOptions{EnvTag: "bench", Store: store, Registry: rc,
				Prefix: host + "/configpub", Signer: signer})
			if err != nil || res.Pushed != n {
				b.Fatalf("republish: %+v, %v; want %d pushed", res, err, n)
			}
		}))
		took += time.Since(start)
	}
	b.ReportMetric(float64(took.Microseconds())/float64(b.N*n), "us/artifact")
	b.ReportMetric(float64(rise)/(1<<20), "heap-rise-MiB")
}
