package console

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestAckLagLeavesRetiredTargetsOut: release 1 (through the real
// promoter) has host-0, host-1 and host-2; release 2, a day later, drops
// host-1 and host-2, which are retired — host-1 had been read back
// APPLIED, host-2 never. host-0's runtime acknowledges release 1 a minute
// after the move. configpub_unacknowledged_targets and
// configpub_ack_lag_seconds count host-0 alone, a week later too: they
// counted host-2 as unacknowledged for ever, and host-1's lag, for targets
// no runtime is to acknowledge any more.
func TestAckLagLeavesRetiredTargetsOut(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	clock := simclock.New(t0)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := promoter.Open(ctx, db.PoolURL(t, db.URLFor(t, "configpub_promoter")), promoter.Options{Signer: key, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return "sha256:" + hex.EncodeToString(h[:]) }
	target := func(i int) promoter.Target {
		body := []byte(fmt.Sprintf("runtimePolicy:\n  host: host-%d\n  releaseVersion: 1\ngatewayPolicy: {}\n", i))
		h := sha256.Sum256(body)
		return promoter.Target{Host: fmt.Sprintf("host-%d", i), ServiceID: "gw", EnvTag: "prod", Audience: "gateway",
			SnapshotID: uuid.NewString(), PublicationID: "0c0f2a3e-7d1b-4c55-9a6e-1f2a3b4c5d6e", PolicySnapshotID: uuid.NewString(),
			ReleaseVersion: 1, PolicyVersion: 1, PolicyDigest: sum(fmt.Sprint("p", i)), ContentDigest: sum(fmt.Sprint("c", i)),
			PropertySetDigest: sum("ps"), ArtifactDigest: "sha256:" + hex.EncodeToString(h[:]), Values: body,
			CreatedAt: t0, ValidFrom: t0, ExpiresAt: t0.Add(21 * 24 * time.Hour), Changed: true, LeaseProfile: "production",
			Lease: promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute}}
	}
	t0s := []promoter.Target{target(0), target(1), target(2)}
	release := func(v int64, ts ...promoter.Target) promoter.ReleaseInput {
		return promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: v, BaseReleaseVersion: v - 1,
			ManifestBytes: []byte(fmt.Sprintf("release %d\n", v)), Actor: "ci", Reason: fmt.Sprintf("release %d", v), Targets: ts}
	}
	if _, err := ps.RecordAndActivate(ctx, release(1, t0s...)); err != nil {
		t.Fatal(err)
	}
	receipt := func(host string, at time.Time) {
		t.Helper()
		if _, err := db.Pool(t).Exec(ctx, `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome,
				artifact_digest, reported_at, kind, endpoint, running_snapshot_id)
			SELECT p.host, p.service_id, p.env_tag, p.snapshot_id, 'APPLIED', s.artifact_digest, $2, 'receipt',
				'https://' || p.host || '/status', p.snapshot_id
			FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
			WHERE p.env_tag = 'prod' AND p.host = $1`, host, at); err != nil {
			t.Fatal(err)
		}
	}
	receipt("host-0", t0.Add(time.Minute))
	receipt("host-1", t0.Add(2*time.Minute))
	clock.Set(t0.Add(24 * time.Hour))
	unchanged := t0s[0]
	unchanged.Changed = false
	if _, err := ps.RecordAndActivate(ctx, release(2, unchanged)); err != nil {
		t.Fatal(err)
	}
	var retired int
	if err := db.Pool(t).QueryRow(ctx, `SELECT count(*) FROM configpub.current_pointer WHERE retired_at IS NOT NULL`).Scan(&retired); err != nil {
		t.Fatal(err)
	}
	if retired != 2 {
		t.Fatalf("release 2 retired %d pointers, want host-1 and host-2", retired)
	}
	for _, after := range []time.Duration{time.Hour, 7 * 24 * time.Hour} {
		clock.Set(t0.Add(24*time.Hour + after))
		c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		body := localGet(c.Handler(), "/metrics").Body.String()
		mustContain(t, fmt.Sprintf("/metrics %s after release 2", after), body,
			`configpub_unacknowledged_targets{env="prod"} 0`+"\n",
			`configpub_ack_lag_seconds_count{env="prod"} 1`+"\n",
			`configpub_ack_lag_seconds_sum{env="prod"} 60`+"\n")
	}
}
