package main

import (
	"context"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
)

// A running gate reads its --key before each round: after a signing-key
// rotation, the rollback it makes is signed with the new key — which
// runtimes that have dropped the old one accept —, not with the key it was
// started with (a rollback every runtime would refuse as UNTRUSTED_KEY).
func TestGateFollowsARotatedKey(t *testing.T) {
	db := pgtest.New(t)
	keyPath, signer := testKey(t)
	snaps := seedReleases(t, db, signer, func(in *promoter.ReleaseInput) {
		if in.ReleaseVersion == 2 {
			in.Rollout = bundle.Rollout{HealthGate: &bundle.HealthGate{Soak: "1h", Rejections: 1, MissingAcks: 2}}
		}
	})
	r := startCLI(t, "gate", "--env", "prod", "--key", keyPath, "--database", db.URL, "--interval", "50ms")

	next := rotateKey(t, keyPath)
	r.waitFor(t, "the new key announced", func() bool {
		return r.printed("gate: " + keyPath + " changed: signing with key " + next.KeyID() + " (was " + signer.KeyID() + ")")
	})

	// host-b, the target release 2 moved, rejects it: the gate rolls back.
	values := []byte("host: host-b\nrelease: 2\n")
	ctx := context.Background()
	if added, err := readback.NewStore(db.Pool(t)).Record(ctx, bundle.Receipt{
		Host: "host-b", ServiceID: "svc", EnvTag: "prod", Audience: "gateway",
		Phase: bundle.PhaseCurrent, Result: bundle.ResultRejected, Reason: "SCHEMA_UNSUPPORTED",
		SnapshotID: snaps[2][1], ReleaseVersion: 2, ArtifactDigest: sum(values),
		LoadedAt: time.Now().UTC().Format(time.RFC3339Nano),
	}, time.Now()); err != nil || !added {
		t.Fatalf("record receipt: added %v, %v", added, err)
	}
	var snapshot, keyID string
	r.waitFor(t, "the rollback", func() bool {
		err := db.Pool(t).QueryRow(ctx, `SELECT snapshot_id::text, manifest_key_id FROM configpub.current_pointer
			WHERE env_tag = 'prod' AND host = 'host-b'`).Scan(&snapshot, &keyID)
		return err == nil && snapshot == snaps[1][1]
	})
	if keyID != next.KeyID() {
		t.Errorf("the rollback's delivery manifest is signed by %s, want the rotated key %s", keyID, next.KeyID())
	}
	r.waitFor(t, "the rollback logged", func() bool { return r.printed("health gate rolled back") })
	r.stop(t)
}
