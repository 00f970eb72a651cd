package promote_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// storedTarget is what the store recorded for one target of a release.
type storedTarget struct {
	host, service, manifestDigest, snapshot string
	release                                 int64
	values                                  []byte
}

// storedTargets reads, as the test's superuser, the targets of release of
// promotertest.Env with their recorded manifest digests and bytes.
func storedTargets(t *testing.T, h *promotertest.Harness, release int64) []storedTarget {
	t.Helper()
	rows, err := h.Pool.Query(context.Background(), `SELECT s.host, s.service_id, s.oci_manifest_digest, s.snapshot_id::text, s.release_version, a.bytes
		FROM configpub.config_release_target t
		JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
		JOIN configpub.artifact a ON a.artifact_digest = s.artifact_digest
		WHERE t.env_tag = $1 AND t.release_version = $2 ORDER BY t.host, t.service_id`, promotertest.Env, release)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ts []storedTarget
	for rows.Next() {
		var s storedTarget
		if err := rows.Scan(&s.host, &s.service, &s.manifestDigest, &s.snapshot, &s.release, &s.values); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, s)
	}
	if err := rows.Err(); err != nil || len(ts) == 0 {
		t.Fatalf("read release %d targets: %d, %v", release, len(ts), err)
	}
	return ts
}

// republishOpts republishes the harness's environment into prefix.
func republishOpts(h *promotertest.Harness, prefix string) promote.RepublishOptions {
	return promote.RepublishOptions{EnvTag: promotertest.Env, Store: h.Store, Registry: h.Client, Prefix: prefix, Signer: h.Signer}
}

// checkRepublished fails unless every target of ts is in the registry under
// prefix, tagged as promote tags it, with the store's manifest digest, its
// exact bytes and a signature by the harness's key that verifies.
func checkRepublished(t *testing.T, h *promotertest.Harness, prefix string, ts []storedTarget) {
	t.Helper()
	checkSignedBy(t, h, prefix, ts, h.Signer.TrustedKey())
}

// checkSignedBy is checkRepublished with the signature by key.
func checkSignedBy(t *testing.T, h *promotertest.Harness, prefix string, ts []storedTarget, key signing.TrustedKey) {
	t.Helper()
	ctx := context.Background()
	keys := []signing.TrustedKey{key}
	for _, s := range ts {
		id := bundle.Identity{Host: s.host, ServiceID: s.service, EnvTag: promotertest.Env}
		repo := registry.Repository(prefix, registry.Artifact{EnvTag: promotertest.Env, Host: s.host, ServiceID: s.service})
		tag, err := resolveTag(ctx, repo, registry.Tag(s.release))
		if err != nil || tag != s.manifestDigest {
			t.Errorf("%s/%s: tag %s names %s (%v), the store recorded %s", s.host, s.service, registry.Tag(s.release), tag, err, s.manifestDigest)
			continue
		}
		pulled, err := h.Client.Pull(ctx, repo+"@"+s.manifestDigest)
		if err != nil || pulled.Digest != s.manifestDigest || !bytes.Equal(pulled.Content, s.values) {
			t.Errorf("%s/%s: pull %s: %v (bytes equal to the store's: %v)", s.host, s.service, s.manifestDigest, err, err == nil && bytes.Equal(pulled.Content, s.values))
		}
		v, err := h.Client.Verify(ctx, repo+"@"+s.manifestDigest, registry.VerifyOptions{Keys: keys, Identity: &id})
		if err != nil || v.Digest != s.manifestDigest {
			t.Errorf("%s/%s: verify %s@%s: %+v, %v", s.host, s.service, repo, s.manifestDigest, v, err)
		}
	}
}

// resolveTag returns the manifest digest tag names in the repository
// (plain HTTP).
func resolveTag(ctx context.Context, repository, tag string) (string, error) {
	repo, err := remote.NewRepository(repository)
	if err != nil {
		return "", err
	}
	repo.PlainHTTP = true
	desc, err := repo.Resolve(ctx, tag)
	if err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// TestRepublishRebuildsTheRegistryFromTheStore: releases 1 and 2 are
// promoted to registry A; republishing the active release into an empty
// registry B, from the store alone, pushes every target's artifact with
// the manifest digest the store recorded, under the tag promote gave it
// (carried-over targets keep r1), signed by the key and verifying as
// promote's own, with every current pointer's delivery manifest attached;
// a second run pushes nothing and writes nothing. Release 1 (what a
// rollback returns to) is republished with --release into a third
// registry with another key (recorded in the store first), without an
// attach; a revoked snapshot of it is skipped.
func TestRepublishRebuildsTheRegistryFromTheStore(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	promoted, err := h.Promote(t, h.Options(h.Repo.R2))
	if err != nil {
		t.Fatalf("promote release 2: %v", err)
	}
	ts := storedTargets(t, h, 2)
	carried := 0
	for _, s := range ts {
		if s.release == 1 {
			carried++
		}
	}
	if carried == 0 || carried == len(ts) {
		t.Fatalf("release 2 carries %d of %d targets over from release 1; the test wants some of each", carried, len(ts))
	}
	byRepo := map[string]string{}
	for _, r := range promoted.Published {
		if r.Kind == registry.KindValues {
			byRepo[strings.TrimPrefix(r.Repository, h.Prefix)] = r.Digest
		}
	}

	b := registrytest.New(t, registrytest.Options{})
	prefixB := b.Host + "/configpub"
	var seen int
	o := republishOpts(h, prefixB)
	o.Progress = func(registry.Result) { seen++ }
	res, err := promote.Republish(ctx, o)
	if err != nil {
		t.Fatalf("republish into an empty registry: %v (%+v)", err, res)
	}
	if res.Release != 2 || !res.Active || res.Targets != len(ts) || res.Pushed != len(ts) || res.AlreadyPresent != 0 ||
		res.Signed != len(ts) || res.RefusedCount != 0 || res.SkippedCount != 0 || seen != len(ts) {
		t.Fatalf("republish: %+v (progress %d), want release 2 active, %d targets pushed and signed", res, seen, len(ts))
	}
	if res.Attach == nil || res.Attach.AttachedCount != len(ts) || res.Attach.FailedCount != 0 {
		t.Fatalf("republish attach: %+v, want %d attached", res.Attach, len(ts))
	}
	checkRepublished(t, h, prefixB, ts)
	for _, s := range ts {
		repo := registry.Repository(prefixB, registry.Artifact{EnvTag: promotertest.Env, Host: s.host, ServiceID: s.service})
		if d := byRepo[strings.TrimPrefix(repo, prefixB)]; d != s.manifestDigest {
			t.Errorf("%s/%s: promote pushed %s to registry A, republish %s to B", s.host, s.service, d, s.manifestDigest)
		}
		if ms, err := h.Client.DeliveryManifests(ctx, repo+"@"+s.manifestDigest, registry.DeliveryManifestOptions{}); err != nil || len(ms) != 1 {
			t.Errorf("%s/%s: %d delivery manifests attached in B (%v), want 1", s.host, s.service, len(ms), err)
		}
	}

	b.Reset()
	again, err := promote.Republish(ctx, republishOpts(h, prefixB))
	if err != nil || again.Pushed != 0 || again.AlreadyPresent != len(ts) || again.Signed != 0 || again.BytesUploaded != 0 {
		t.Fatalf("republish again: %+v, %v; want all %d present, nothing pushed", again, err, len(ts))
	}
	if n := b.Writes(); n != 0 {
		t.Fatalf("republish again wrote %d times to the registry, want 0", n)
	}

	// Release 1, signed with another key, which the store records first.
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	c := registrytest.New(t, registrytest.Options{})
	prefixC := c.Host + "/configpub"
	o = republishOpts(h, prefixC)
	o.Release, o.Signer = 1, other
	r1, err := promote.Republish(ctx, o)
	ts1 := storedTargets(t, h, 1)
	if err != nil || r1.Release != 1 || r1.Active || r1.Pushed != len(ts1) || r1.Attach != nil {
		t.Fatalf("republish --release 1: %+v, %v; want %d pushed, no attach", r1, err, len(ts1))
	}
	checkSignedBy(t, h, prefixC, ts1, other.TrustedKey())
	keys, err := h.Store.SigningKeys(ctx)
	if err != nil || !slices.ContainsFunc(keys, func(k promoter.SigningKey) bool { return k.ID == other.KeyID() }) {
		t.Fatalf("the store's signing keys %+v (%v) lack %s, which signed release 1's artifacts", keys, err, other.KeyID())
	}

	// A revoked snapshot is not pushed again: release 1's own snapshot of
	// a target release 2 changed, revoked, is skipped and named.
	inR2 := map[string]bool{}
	for _, s := range ts {
		inR2[s.snapshot] = true
	}
	var revoked storedTarget
	for _, s := range ts1 {
		if !inR2[s.snapshot] {
			revoked = s
		}
	}
	if _, err := h.Store.Revoke(ctx, promoter.RevokeInput{CommandID: promotertest.ID("republish", "revoke"), SnapshotID: revoked.snapshot,
		Reason: "leaked", Actor: "oncall"}); err != nil {
		t.Fatal(err)
	}
	e := registrytest.New(t, registrytest.Options{})
	o.Prefix = e.Host + "/configpub"
	r1, err = promote.Republish(ctx, o)
	if err != nil || r1.Pushed != len(ts1)-1 || r1.SkippedCount != 1 || strings.Join(r1.Skipped, "") != revoked.host+"/"+revoked.service {
		t.Fatalf("republish --release 1 with a revoked snapshot: %+v, %v; want it skipped, %d pushed", r1, err, len(ts1)-1)
	}
	repo := registry.Repository(o.Prefix, registry.Artifact{EnvTag: promotertest.Env, Host: revoked.host, ServiceID: revoked.service})
	if d, err := resolveTag(ctx, repo, registry.Tag(1)); !errors.Is(err, errdef.ErrNotFound) {
		t.Fatalf("%s: the revoked snapshot's tag r1 names %s (%v), want nothing pushed", repo, d, err)
	}

	o.Release = 9
	if _, err := promote.Republish(ctx, o); !errors.Is(err, promoter.ErrNotFound) || !strings.Contains(err.Error(), "release 9") {
		t.Fatalf("republish release 9: %v, want not found naming it", err)
	}
}

// TestRepublishResumesAfterAnInterruption: a republish cancelled after a
// few artifacts leaves those complete, and the next run pushes only the
// rest. The store is read in batches of two targets (MoveBatch), so the
// stream crosses several statements.
func TestRepublishResumesAfterAnInterruption(t *testing.T) {
	h := promotertest.New(t)
	var err error
	if h.Store, err = promoter.Open(context.Background(), h.Pool, promoter.Options{Signer: h.Signer, MoveBatch: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	ts := storedTargets(t, h, 1)
	if len(ts) < 4 {
		t.Fatalf("release 1 has %d targets, the test wants at least 4", len(ts))
	}
	b := registrytest.New(t, registrytest.Options{})
	prefixB := b.Host + "/configpub"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := republishOpts(h, prefixB)
	done := 0
	o.Progress = func(registry.Result) {
		if done++; done == 2 {
			cancel()
		}
	}
	res, err := promote.Republish(ctx, o)
	if !errors.Is(err, context.Canceled) || res == nil || res.Pushed < 2 || res.Pushed >= len(ts) || res.Attach != nil {
		t.Fatalf("interrupted republish: %+v, %v; want cancelled after 2 of %d", res, err, len(ts))
	}
	first := res.Pushed
	res, err = promote.Republish(context.Background(), republishOpts(h, prefixB))
	// An artifact in flight at the cancellation may have been tagged all
	// the same (the registry took the manifest, the client saw the
	// cancellation): found present now, not pushed again.
	if err != nil || res.Pushed == 0 || res.Pushed > len(ts)-first || res.Pushed+res.AlreadyPresent != len(ts) || res.Targets != len(ts) {
		t.Fatalf("republish after the interruption: %+v, %v; want the %d left pushed or present, the %d done present", res, err, len(ts)-first, first)
	}
	checkRepublished(t, h, prefixB, ts)
}

// TestRepublishRefusesATamperedStore: with one snapshot's createdAt
// changed by a second and another's values.yml bytes changed (as the
// superuser, past the store's guards), republish pushes every other
// target and refuses those two, naming them, with nothing in the registry
// for them: the artifacts rebuilt from the altered rows do not hash to the
// manifest digests the store recorded.
func TestRepublishRefusesATamperedStore(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	ts := storedTargets(t, h, 1)
	timeT, bytesT := ts[0], ts[1]
	tx, err := h.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		`SET LOCAL session_replication_role = replica`, // past the append-only triggers
		// Past the CHECKs that tie each digest and size to its bytes.
		`DO $$ DECLARE c text; BEGIN
			FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'configpub.artifact'::regclass AND contype = 'c' LOOP
				EXECUTE format('ALTER TABLE configpub.artifact DROP CONSTRAINT %I', c);
			END LOOP;
		END $$`,
		`UPDATE configpub.config_snapshot SET created_at = created_at + interval '1 second' WHERE snapshot_id = '` + timeT.snapshot + `'`,
		`UPDATE configpub.artifact SET bytes = bytes || '#'::bytea WHERE artifact_digest =
			(SELECT artifact_digest FROM configpub.config_snapshot WHERE snapshot_id = '` + bytesT.snapshot + `')`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("tamper: %s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	b := registrytest.New(t, registrytest.Options{})
	prefixB := b.Host + "/configpub"
	res, err := promote.Republish(ctx, republishOpts(h, prefixB))
	if !errors.Is(err, promote.ErrRepublishRefused) || !errors.Is(err, promoter.ErrIntegrity) {
		t.Fatalf("republish of a tampered store: %v, want refused", err)
	}
	for _, s := range []storedTarget{timeT, bytesT} {
		if !strings.Contains(err.Error(), s.host+"/"+s.service) {
			t.Errorf("the refusal does not name %s/%s: %v", s.host, s.service, err)
		}
	}
	if res.RefusedCount != 2 || res.Pushed != len(ts)-2 || strings.Join(res.Refused, " ") != timeT.host+"/"+timeT.service+" "+bytesT.host+"/"+bytesT.service {
		t.Fatalf("republish of a tampered store: %+v, want the two refused, %d pushed", res, len(ts)-2)
	}
	if !strings.Contains(err.Error(), "the store recorded "+timeT.manifestDigest) {
		t.Errorf("the refusal of %s/%s does not name the recorded digest: %v", timeT.host, timeT.service, err)
	}
	for _, s := range []storedTarget{timeT, bytesT} {
		repo := registry.Repository(prefixB, registry.Artifact{EnvTag: promotertest.Env, Host: s.host, ServiceID: s.service})
		if d, err := resolveTag(ctx, repo, registry.Tag(s.release)); !errors.Is(err, errdef.ErrNotFound) {
			t.Errorf("%s: tag %s after the refusal: %s, %v; want not found", repo, registry.Tag(s.release), d, err)
		}
	}
	checkRepublished(t, h, prefixB, ts[2:])
}
