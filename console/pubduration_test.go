package console

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestPublicationDurationOfAReleaseStagedForDays: a release staged on
// Monday and activated on Thursday (three simulated days, through the real
// promoter) lands in a finite bucket of
// configpub_publication_duration_seconds, not only in +Inf: the buckets
// reach two weeks.
func TestPublicationDurationOfAReleaseStagedForDays(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	clock := simclock.New(t0)
	store, err := promoter.Open(ctx, db.Pool(t), promoter.Options{Signer: signer, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	values := []byte("host: h0.example\n")
	digest := func(s string) string { return "sha256:" + strings.Repeat(s, 64) }
	in := promoter.ReleaseInput{
		CommandID: uuid.NewString(), EnvTag: "slow", ReleaseVersion: 1, ManifestBytes: []byte("release 1"),
		Actor: "alex@example.com", Reason: "staged on Monday", SourcesDigest: digest("5"),
		Targets: []promoter.Target{{
			Host: "h0.example", ServiceID: "svc", EnvTag: "slow", Audience: "gateway",
			SnapshotID: uuid.NewString(), PublicationID: uuid.NewString(), PolicySnapshotID: uuid.NewString(),
			ReleaseVersion: 1, PolicyVersion: 1, PolicyDigest: digest("1"), ContentDigest: digest("2"),
			PropertySetDigest: digest("3"), ArtifactDigest: fmt.Sprintf("sha256:%x", sha256.Sum256(values)), Values: values,
			CreatedAt: t0, ValidFrom: t0.Add(-time.Hour), ExpiresAt: t0.Add(21 * 24 * time.Hour),
			Lease: promoter.LeaseWindow{RefreshAfter: time.Minute, ExpiresAfter: time.Hour},
		}},
	}
	if _, err := store.Stage(ctx, in); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * 24 * time.Hour)
	if _, err := store.Activate(ctx, promoter.MoveInput{CommandID: uuid.NewString(), EnvTag: "slow", Release: 1,
		Actor: "alex@example.com", Reason: "activated on Thursday"}); err != nil {
		t.Fatal(err)
	}

	con, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	body := localGet(con.Handler(), "/metrics").Body.String()
	const name = "configpub_publication_duration_seconds_bucket"
	mustContain(t, "metrics", body,
		`configpub_publication_duration_seconds_count{env="slow"} 1`,
		`configpub_publication_duration_seconds_sum{env="slow"} 259200`,
		name+`{env="slow",le="86400"} 0`,
		name+`{env="slow",le="345600"} 1`,
		name+`{env="slow",le="1.2096e+06"} 1`)
	lintMetrics(t, body)
}
