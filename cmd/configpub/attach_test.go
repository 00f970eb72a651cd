package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// attachFixture records and activates release 1 of prod with one target
// per host, each artifact published to a real registry, and returns the
// database, the signing key's path, a registry client and the published
// artifacts (in hosts order).
func attachFixture(t *testing.T, opts registrytest.Options, hosts ...string) (*pgtest.DB, string, *registry.Client, *registry.Summary, promoter.ReleaseInput) {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	reg := registrytest.New(t, opts)
	keyPath, signer := testKey(t)
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	validFrom := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	in := promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: 1,
		ManifestBytes: []byte("release 1"), Actor: "alice", Reason: "release 1"}
	var arts []registry.Artifact
	for i, host := range hosts {
		values := []byte(fmt.Sprintf("host: %s\n", host))
		tg := promoter.Target{
			Host: host, ServiceID: "svc", EnvTag: "prod", Audience: "gateway",
			SnapshotID:       uuid.NewSHA1(uuid.NameSpaceURL, []byte(host)).String(),
			PublicationID:    uuid.NewSHA1(uuid.NameSpaceURL, []byte("pub")).String(),
			PolicySnapshotID: uuid.NewSHA1(uuid.NameSpaceURL, []byte("pol"+host)).String(),
			ReleaseVersion:   1, PolicyVersion: 1,
			PolicyDigest: sum([]byte(fmt.Sprint("p", i))), ContentDigest: sum([]byte(fmt.Sprint("c", i))),
			PropertySetDigest: sum([]byte("ps")), ArtifactDigest: sum(values), Values: values,
			CreatedAt: validFrom, ValidFrom: validFrom, ExpiresAt: validFrom.Add(25 * time.Hour),
			Lease: promoter.LeaseWindow{RefreshAfter: time.Minute, ExpiresAfter: time.Hour},
		}
		arts = append(arts, registry.Artifact{Host: host, ServiceID: "svc", EnvTag: "prod", Audience: "gateway",
			SnapshotID: tg.SnapshotID, PublicationID: tg.PublicationID, PolicyDigest: tg.PolicyDigest,
			ContentDigest: tg.ContentDigest, ArtifactDigest: tg.ArtifactDigest, ReleaseVersion: 1, CreatedAt: validFrom, Values: values})
		in.Targets = append(in.Targets, tg)
	}
	pub, err := rc.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub", Artifacts: arts, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	for i := range in.Targets {
		in.Targets[i].OCIReference = pub.Results[i].Ref()
	}
	store, err := promoter.Open(ctx, db.Pool(t), promoter.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.RecordAndActivate(ctx, in); err != nil {
		t.Fatal(err)
	}
	return db, keyPath, rc, pub, in
}

// TestRegistryAttachAndRenewAttach: after a release whose artifacts are in
// a real registry, `registry attach` attaches each pointer's stored
// delivery manifest to its artifact (again: nothing new), and `lease renew
// --attach` attaches the renewed one, listed first.
func TestRegistryAttachAndRenewAttach(t *testing.T) {
	ctx := context.Background()
	db, keyPath, rc, pub, in := attachFixture(t, registrytest.Options{}, "host-a", "host-b")
	stored := func(host string) []byte {
		var m []byte
		if err := db.Pool(t).QueryRow(ctx, "SELECT manifest FROM configpub.current_pointer WHERE host = $1", host).Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}

	for range 2 {
		out, code := runStore("registry", "attach", "--env", "prod", "--database", db.URL, "--plain-http")
		if code != exitOK || !strings.Contains(out, "attached 2 delivery manifests") {
			t.Fatalf("registry attach: exit %d\n%s", code, out)
		}
	}
	out, code := runStore("registry", "attach", "--env", "prod", "--database", db.URL, "--plain-http", "-o", "json")
	var ar struct {
		EnvTag        string   `json:"envTag"`
		AttachedCount int      `json:"attachedCount"`
		Attached      []string `json:"attached"`
		Skipped       []string `json:"skipped"`
		PrunedCount   int      `json:"prunedCount"`
	}
	if code != exitOK {
		t.Fatalf("registry attach -o json: exit %d\n%s", code, out)
	}
	decodeStrict(t, out, &ar)
	if ar.EnvTag != "prod" || ar.AttachedCount != 2 || strings.Join(ar.Attached, " ") != "host-a/svc host-b/svc" || len(ar.Skipped) != 0 || ar.PrunedCount != 0 {
		t.Fatalf("registry attach -o json: %+v", ar)
	}
	out, code = runStore("db", "migrate", "--database", db.URL, "-o", "json")
	var mr struct {
		Applied         int `json:"applied"`
		SchemaVersion   int `json:"schemaVersion"`
		DatabaseVersion int `json:"databaseVersion"`
	}
	if code != exitOK {
		t.Fatalf("db migrate -o json: exit %d\n%s", code, out)
	}
	decodeStrict(t, out, &mr)
	if mr.Applied != 0 || mr.SchemaVersion < 1 || mr.DatabaseVersion != mr.SchemaVersion {
		t.Fatalf("db migrate -o json on a migrated database: %+v", mr)
	}
	for i, tg := range in.Targets {
		ms, err := rc.DeliveryManifests(ctx, pub.Results[i].Ref(), registry.DeliveryManifestOptions{})
		if err != nil || len(ms) != 1 || !bytes.Equal(ms[0].Manifest, stored(tg.Host)) {
			t.Fatalf("%s: %d attached manifests (%v), want exactly the stored one", tg.Host, len(ms), err)
		}
	}

	time.Sleep(1100 * time.Millisecond) // a later issuedAt (seconds)
	out, code = runStore("lease", "renew", "--env", "prod", "--database", db.URL, "--key", keyPath, "--attach", "--plain-http")
	if code != exitOK || !strings.Contains(out, "attached 2 delivery manifests") {
		t.Fatalf("lease renew --attach: exit %d\n%s", code, out)
	}
	for i, tg := range in.Targets {
		ms, err := rc.DeliveryManifests(ctx, pub.Results[i].Ref(), registry.DeliveryManifestOptions{})
		if err != nil || len(ms) != 2 || !bytes.Equal(ms[0].Manifest, stored(tg.Host)) || bytes.Equal(ms[1].Manifest, ms[0].Manifest) {
			t.Fatalf("%s after renewal: %d attached manifests (%v), want the renewed one first", tg.Host, len(ms), err)
		}
	}
	// Renewal after renewal, each artifact keeps its two newest: the one
	// before is removed at every attach.
	for range 2 {
		time.Sleep(1100 * time.Millisecond)
		out, code = runStore("lease", "renew", "--env", "prod", "--database", db.URL, "--key", keyPath, "--attach", "--plain-http")
		if code != exitOK || !strings.Contains(out, "attached 2 delivery manifests; removed 2 superseded") {
			t.Fatalf("lease renew --attach: exit %d\n%s", code, out)
		}
	}
	for i, tg := range in.Targets {
		ms, err := rc.DeliveryManifests(ctx, pub.Results[i].Ref(), registry.DeliveryManifestOptions{})
		if err != nil || len(ms) != 2 || !bytes.Equal(ms[0].Manifest, stored(tg.Host)) {
			t.Fatalf("%s after four attaches: %d attached manifests (%v), want the two newest", tg.Host, len(ms), err)
		}
	}
	// -o json carries the attach with the renewal.
	time.Sleep(1100 * time.Millisecond)
	out, code = runStore("lease", "renew", "--env", "prod", "--database", db.URL, "--key", keyPath, "--attach", "--plain-http", "-o", "json")
	var rr struct {
		EnvTag  string `json:"envTag"`
		Renewed int    `json:"renewed"`
		At      string `json:"at"`
		Attach  struct {
			EnvTag        string   `json:"envTag"`
			AttachedCount int      `json:"attachedCount"`
			Attached      []string `json:"attached"`
			PrunedCount   int      `json:"prunedCount"`
		} `json:"attach"`
	}
	if code != exitOK {
		t.Fatalf("lease renew --attach -o json: exit %d\n%s", code, out)
	}
	decodeStrict(t, out, &rr)
	if rr.Renewed != 2 || rr.Attach.AttachedCount != 2 || rr.Attach.PrunedCount != 2 {
		t.Fatalf("lease renew --attach -o json: %+v, want 2 renewed, 2 attached, 2 pruned", rr)
	}
}

// TestRegistryAttachKeepsARenewalGCDeleted: registry attach (no signing
// key) after a renewal it attached was deleted by db gc keeps it, next to
// the newest, as the newest two manifests the store issued: it verifies
// the renewal with the public key the store recorded as it signed. It
// removed it as not issued and kept the release's own manifest instead.
func TestRegistryAttachKeepsARenewalGCDeleted(t *testing.T) {
	ctx := context.Background()
	db, keyPath, rc, pub, _ := attachFixture(t, registrytest.Options{}, "host-a")
	current := func() []byte {
		var m []byte
		if err := db.Pool(t).QueryRow(ctx, "SELECT manifest FROM configpub.current_pointer WHERE host = 'host-a'").Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	step := func(args ...string) {
		t.Helper()
		if out, code := runStore(append(args, "--database", db.URL)...); code != exitOK {
			t.Fatalf("%s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	attach := func() { step("registry", "attach", "--env", "prod", "--plain-http") }
	renew := func() {
		time.Sleep(1100 * time.Millisecond) // a later issuedAt (seconds)
		step("lease", "renew", "--env", "prod", "--key", keyPath)
	}
	attach()
	renew()
	attach()
	gone := current() // attached, to be deleted by gc
	renew()
	out, code := runStore("db", "gc", "--renewal-min-age", "1ms", "--database", db.URL)
	var left bool
	if err := db.Pool(t).QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM configpub.delivery_manifest WHERE manifest = $1)", gone).Scan(&left); err != nil || left || code != exitOK {
		t.Fatalf("db gc: exit %d, the attached renewal still stored: %v (%v)\n%s", code, left, err, out)
	}
	attach()
	ms, err := rc.DeliveryManifests(ctx, pub.Results[0].Ref(), registry.DeliveryManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || !bytes.Equal(ms[0].Manifest, current()) || !bytes.Equal(ms[1].Manifest, gone) {
		got := make([]string, len(ms))
		for i, m := range ms {
			got[i] = m.IssuedAt
		}
		t.Fatalf("after the attach the referrers are issued at %v; want the current manifest and the renewal gc deleted", got)
	}
}

// TestRegistryAttachGoesOnPastAFailedTarget: with one of four artifacts
// deleted from the registry, `registry attach` attaches the three others,
// says which one failed and why, and exits non-zero; -o json counts it;
// `lease renew --attach` renews and attaches the three others the same way.
// An attach stopped at the first failure and cancelled the attaches in
// flight, and never read the later batches: after one lost artifact no OCI
// runtime got a rollback's manifest.
func TestRegistryAttachGoesOnPastAFailedTarget(t *testing.T) {
	ctx := context.Background()
	db, keyPath, rc, pub, _ := attachFixture(t, registrytest.Options{}, "host-a", "host-b", "host-c", "host-d")
	repoName, dgst, err := registry.ParseRef(pub.Results[0].Ref())
	if err != nil {
		t.Fatal(err)
	}
	repo, err := remote.NewRepository(repoName)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	desc, err := repo.Resolve(ctx, dgst.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Delete(ctx, desc); err != nil {
		t.Fatalf("delete host-a's artifact: %v", err)
	}
	attachedTo := func(when string) {
		t.Helper()
		for _, r := range pub.Results[1:] {
			if ms, err := rc.DeliveryManifests(ctx, r.Ref(), registry.DeliveryManifestOptions{}); err != nil || len(ms) == 0 {
				t.Fatalf("%s: %s has %d manifests (%v), want its manifest attached", when, r.Ref(), len(ms), err)
			}
		}
	}

	out, code := runStore("registry", "attach", "--env", "prod", "--database", db.URL, "--plain-http")
	if code == exitOK || !strings.Contains(out, "attached 3 delivery manifests; 1 failed (host-a/svc; first: host-a/svc: ") {
		t.Fatalf("registry attach with host-a's artifact gone: exit %d, want a failure naming host-a/svc after the others\n%s", code, out)
	}
	attachedTo("registry attach")
	out, code = runStore("registry", "attach", "--env", "prod", "--database", db.URL, "--plain-http", "-o", "json")
	var ar struct {
		AttachedCount int      `json:"attachedCount"`
		FailedCount   int      `json:"failedCount"`
		Failed        []string `json:"failed"`
		FailError     string   `json:"failError"`
	}
	if code == exitOK {
		t.Fatalf("registry attach -o json: exit %d, want a failure\n%s", code, out)
	}
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&ar); err != nil { // the error follows the report
		t.Fatalf("registry attach -o json: %v\n%s", err, out)
	}
	if ar.AttachedCount != 3 || ar.FailedCount != 1 || strings.Join(ar.Failed, " ") != "host-a/svc" || !strings.Contains(ar.FailError, "not found") {
		t.Fatalf("registry attach -o json: %+v", ar)
	}

	time.Sleep(1100 * time.Millisecond) // a later issuedAt (seconds)
	out, code = runStore("lease", "renew", "--env", "prod", "--database", db.URL, "--key", keyPath, "--attach", "--plain-http")
	if code == exitOK || !strings.Contains(out, "renewed 4 leases") || !strings.Contains(out, "attached 3 delivery manifests; 1 failed (host-a/svc") {
		t.Fatalf("lease renew --attach with host-a's artifact gone: exit %d\n%s", code, out)
	}
	attachedTo("lease renew --attach")
}

// TestLeaseRenewAttachHasADeadline: `lease renew --interval 1s --attach`
// against a registry that stops answering (a fault-injecting handler holds
// every request) reports each round's attach as failed within the interval
// and keeps renewing in the database: the attach ran without a deadline, and
// one stuck registry stopped every lease renewal, those of runtimes that
// only use the Config Server included.
func TestLeaseRenewAttachHasADeadline(t *testing.T) {
	var hang *registrytest.FaultInjector
	db, keyPath, _, _, _ := attachFixture(t, registrytest.Options{Wrap: func(h http.Handler) http.Handler { hang = registrytest.NewFaultInjector(h); return hang }}, "host-a")
	t.Cleanup(hang.Release)
	r := startCLI(t, "lease", "renew", "--env", "prod", "--key", keyPath, "--database", db.URL, "--interval", "1s", "--attach", "--plain-http")
	renewals := func() int { return r.count("prod: renewed 1 leases") }
	r.waitFor(t, "a first renewal attached", func() bool { return r.printed("attached 1 delivery manifests") })
	hang.SetHanging(true)
	r.waitFor(t, "the attach failing on its deadline", func() bool { return r.printed("renewal failed (1 in a row)") })
	before := renewals()
	r.waitFor(t, "renewals going on", func() bool { return renewals() >= before+2 })
	r.stop(t)
	if !r.printed("context deadline exceeded") {
		t.Errorf("the failure does not say the attach ran out of time:\n%s", r.out.String())
	}
}
