package promoter_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/client/ocipull"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// TestOCIPathNeedsACurrentDeliveryManifest runs the OCI path end to end
// against a real registry and database: release 1 is promoted and its
// delivery manifests attached as referrers; 40 days later (past release
// 1's 30-day delivery lease) release 2 is promoted and attached. A fresh
// runtime pulling release 1's agent artifact — validly cosign-signed, with
// only its old, expired manifest — refuses it; release 2's artifact is
// applied; a runtime that has applied release 2 refuses release 1 even
// with a manifest whose lease is still valid (a replay); after a rollback
// to release 1 and a new attach, release 1's artifact is applied.
func TestOCIPathNeedsACurrentDeliveryManifest(t *testing.T) {
	ctx := context.Background()
	h := promotertest.New(t)
	clk := simclock.New(time.Date(2026, 8, 14, 0, 0, 0, 0, time.UTC)) // after every fixture snapshot's validFrom
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	const host, svc = "dev.lightapi.net", "com.networknt.agent-advisor-1.0.0"
	id := bundle.Identity{Host: host, ServiceID: svc, EnvTag: promotertest.Env}
	promote := func(commit string) string {
		t.Helper()
		return promotedRef(t, h, store, commit, host, svc)
	}
	attach := func() {
		t.Helper()
		res, err := store.AttachDeliveryManifests(ctx, promotertest.Env, rc)
		if err != nil || len(res.Attached) == 0 {
			t.Fatalf("attach: %+v %v", res, err)
		}
	}
	runtime := func() *client.Client {
		t.Helper()
		c, err := client.New(client.Options{Identity: id, Audience: bundle.AudienceAgent,
			TrustedKeys: []signing.TrustedKey{h.Signer.TrustedKey()}, Clock: clk, CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	puller := &ocipull.Puller{Registry: rc, Keys: []signing.TrustedKey{h.Signer.TrustedKey()}, ManifestKeys: []signing.TrustedKey{h.Signer.TrustedKey()}, Identity: id}

	ref1 := promote(h.Repo.R1.String())
	attach()
	if again, err := store.AttachDeliveryManifests(ctx, promotertest.Env, rc); err != nil || len(again.Attached) == 0 {
		t.Fatalf("re-attach: %+v %v", again, err)
	}
	ms, err := rc.DeliveryManifests(ctx, ref1, registry.DeliveryManifestOptions{})
	if err != nil || len(ms) != 1 {
		t.Fatalf("release 1 artifact: %d attached manifests %v, want exactly 1 after attaching twice", len(ms), err)
	}
	// With its manifest current, release 1 is applied.
	if ev, err := runtime().LoadOCI(ctx, puller, ref1); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("release 1 with its current manifest: %+v %v", ev, err)
	}
	early := runtime()
	if _, err := early.LoadOCI(ctx, puller, ref1); err != nil {
		t.Fatal(err)
	}

	clk.Set(clk.Now().Add(40 * 24 * time.Hour))
	ref2 := promote(h.Repo.R2.String())
	if ref2 == ref1 {
		t.Fatal("release 2 did not change the agent artifact")
	}
	attach()

	fresh := runtime()
	ev, err := fresh.LoadOCI(ctx, puller, ref1)
	if err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonExpired {
		t.Fatalf("old, validly signed release 1 without a current manifest: got %s %s (%v), want REJECTED EXPIRED", ev.Outcome, ev.Reason, err)
	}
	ev, err = fresh.LoadOCI(ctx, puller, ref2)
	if err != nil || ev.Outcome != client.OutcomeApplied || ev.Source != client.SourceOCI {
		t.Fatalf("release 2 with its manifest: got %+v %v, want APPLIED", ev, err)
	}

	// Within release 1's lease, a runtime that has seen release 2 refuses
	// release 1's old manifest: a replay.
	clk.Set(clk.Now().Add(-40 * 24 * time.Hour))
	if ev, err := early.LoadOCI(ctx, puller, ref2); err == nil {
		t.Fatalf("release 2's manifest is signed 40 days in the future: %+v", ev)
	}
	clk.Set(clk.Now().Add(40 * 24 * time.Hour))
	if _, err := early.LoadOCI(ctx, puller, ref2); err != nil {
		t.Fatal(err)
	}
	clk.Set(clk.Now().Add(-40 * 24 * time.Hour))
	ev, err = early.LoadOCI(ctx, puller, ref1)
	if err == nil || ev.Reason != client.ReasonSequenceRegression {
		t.Fatalf("release 1 replayed after release 2: got %s %s (%v), want REJECTED SEQUENCE_REGRESSION", ev.Outcome, ev.Reason, err)
	}
	clk.Set(clk.Now().Add(40 * 24 * time.Hour))

	// A rollback signs release 1 a current manifest; attached, it applies.
	clk.Set(clk.Now().Add(time.Minute))
	if _, err := store.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: promotertest.Env, ToRelease: 1, Actor: "test", Reason: "oci rollback"}); err != nil {
		t.Fatal(err)
	}
	attach()
	ev, err = fresh.LoadOCI(ctx, puller, ref1)
	if err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("release 1 after the rollback: got %s %s (%v), want APPLIED", ev.Outcome, ev.Reason, err)
	}
	cur, err := fresh.Current()
	if err != nil || cur.Envelope.ReleaseVersion != 1 || cur.Manifest == nil {
		t.Fatalf("current after the rollback: %v %v", cur, err)
	}
}

// revokingAttacher is the real registry client, which on its first attach
// revokes the snapshot of the environment's last pointer (as an operator
// might while an attach runs).
type revokingAttacher struct {
	*registry.Client
	revoke func()
	mu     sync.Mutex
	calls  int
}

func (a *revokingAttacher) AttachDeliveryManifest(ctx context.Context, ref string, m registry.SignedDeliveryManifest) (string, error) {
	a.call()
	return a.Client.AttachDeliveryManifest(ctx, ref, m)
}

func (a *revokingAttacher) AttachDeliveryManifestKeeping(ctx context.Context, ref string, m registry.SignedDeliveryManifest, keep registry.KeepOptions) (registry.Attached, error) {
	a.call()
	return a.Client.AttachDeliveryManifestKeeping(ctx, ref, m, keep)
}

// call counts an attach and revokes on the first.
func (a *revokingAttacher) call() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.calls++; a.calls == 1 {
		a.revoke()
	}
}

// TestAttachKeepsTheIssuedReferrersAmongJunk attaches a release's delivery
// manifests to a real registry and then, as anyone with push access could
// with oras attach, eight referrers of the delivery-manifest type with huge
// sequence annotations, naming the promoter's key id and signed by another
// key. A runtime that pulls from the registry still applies the artifact,
// and a lease renewal's attach keeps the renewed manifest and the one
// before it, the two the store issued, and removes the eight (the prune
// ordered the referrers by their unsigned annotations and removed the
// genuine ones, the manifest it had just attached included, so a fresh
// runtime failed closed with UNTRUSTED_KEY).
func TestAttachKeepsTheIssuedReferrersAmongJunk(t *testing.T) {
	ctx := context.Background()
	h := promotertest.New(t)
	clk := simclock.New(time.Date(2026, 8, 14, 0, 0, 0, 0, time.UTC))
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	const host, svc = "dev.lightapi.net", "com.networknt.agent-advisor-1.0.0"
	id := bundle.Identity{Host: host, ServiceID: svc, EnvTag: promotertest.Env}
	ref := promotedRef(t, h, store, h.Repo.R1.String(), host, svc)
	if _, err := store.AttachDeliveryManifests(ctx, promotertest.Env, rc); err != nil {
		t.Fatal(err)
	}
	trusted := []signing.TrustedKey{h.Signer.TrustedKey()}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		junk := []byte(fmt.Sprintf(`{"junk":%d}`, i))
		sig, err := signing.SignBlob(other, junk)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rc.AttachDeliveryManifest(ctx, ref, registry.SignedDeliveryManifest{Manifest: junk, Signature: sig,
			KeyID: trusted[0].ID, Sequence: 1<<62 + int64(i), IssuedAt: clk.Now().Format(time.RFC3339)}); err != nil {
			t.Fatal(err)
		}
	}
	puller := &ocipull.Puller{Registry: rc, Keys: trusted, ManifestKeys: trusted, Identity: id}
	load := func(when string) {
		t.Helper()
		c, err := client.New(client.Options{Identity: id, Audience: bundle.AudienceAgent, TrustedKeys: trusted, Clock: clk, CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := c.LoadOCI(ctx, puller, ref); err != nil || ev.Outcome != client.OutcomeApplied {
			t.Fatalf("%s: a fresh runtime got %s %s (%v), want APPLIED", when, ev.Outcome, ev.Reason, err)
		}
	}
	load("with eight junk referrers")

	clk.Set(clk.Now().Add(5 * time.Minute))
	if _, err := store.RenewLeases(ctx, promotertest.Env); err != nil {
		t.Fatal(err)
	}
	ar, err := store.AttachDeliveryManifests(ctx, promotertest.Env, rc)
	if err != nil || ar.PruneFailures != 0 || ar.Pruned < 8 {
		t.Fatalf("attach after the renewal: %+v, %v; want the eight junk referrers removed", ar, err)
	}
	ms, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
	if err != nil || len(ms) != 2 {
		t.Fatalf("after the attach: %d referrers (%v), want the renewed manifest and the one before", len(ms), err)
	}
	for _, m := range ms {
		if _, err := signing.VerifyBlob(trusted, m.Manifest, m.Signature, m.KeyID); err != nil {
			t.Fatalf("kept referrer %s: %v", m.Manifest, err)
		}
	}
	load("after the renewal's attach")
}

// TestAttachReadsEachBatchInItsTurn attaches the fixture's delivery
// manifests two pointers at a time and revokes
// the last pointer's snapshot while the first batch is attached: the last
// batch is read after that, so that pointer is skipped and every other is
// attached, in (host, serviceId) order. An attach that read every pointer
// first would attach it.
func TestAttachReadsEachBatchInItsTurn(t *testing.T) {
	ctx := context.Background()
	h := promotertest.New(t)
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, MoveBatch: 2,
		Clock: func() time.Time { return time.Date(2026, 8, 14, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(h.Repo.R1)
	o.Review.Commit, o.Store = h.Repo.R1.String(), store
	if _, err := h.Promote(t, o); err != nil {
		t.Fatal(err)
	}
	rows, err := h.Pool.Query(ctx, `SELECT host || '/' || service_id, snapshot_id::text FROM configpub.current_pointer
		WHERE env_tag = $1 AND retired_at IS NULL ORDER BY host, service_id`, promotertest.Env)
	if err != nil {
		t.Fatal(err)
	}
	var ids, snaps []string
	var idv, snap string
	if _, err := pgx.ForEachRow(rows, []any{&idv, &snap}, func() error {
		ids, snaps = append(ids, idv), append(snaps, snap)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) < 5 {
		t.Fatalf("%d pointers: want at least 5 (three batches of two)", len(ids))
	}
	last := len(ids) - 1
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	a := &revokingAttacher{Client: rc, revoke: func() {
		if _, err := store.Revoke(ctx, promoter.RevokeInput{CommandID: uuid.NewString(), SnapshotID: snaps[last],
			Reason: "leaked while attaching", Actor: "sec"}); err != nil {
			t.Error(err)
		}
	}}
	res, err := store.AttachDeliveryManifests(ctx, promotertest.Env, a)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Attached, " ") != strings.Join(ids[:last], " ") || strings.Join(res.Skipped, " ") != ids[last] || a.calls != last {
		t.Fatalf("attached %v, skipped %v in %d calls; want %v attached and %s skipped", res.Attached, res.Skipped, a.calls, ids[:last], ids[last])
	}
}

// recordingAttacher stands in for the registry in
// TestAttachListsTheFirstAndCountsAll: it records the references it is
// asked to attach to and uploads nothing (the synthetic release's
// references name no artifact; the real client's attaching is tested
// above).
type recordingAttacher struct {
	mu   sync.Mutex
	refs []string
}

func (a *recordingAttacher) AttachDeliveryManifest(_ context.Context, ref string, _ registry.SignedDeliveryManifest) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refs = append(a.refs, ref)
	return "", nil
}

// TestAttachListsTheFirstAndCountsAll attaches a 250-target release, half
// of whose targets have no OCI reference, 40 pointers a batch: the result
// counts the 125 attached and the 125 skipped and lists the first
// SkippedListed of each in identity order, as a renewal lists what it
// skips.
func TestAttachListsTheFirstAndCountsAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *promoter.Options) { o.MoveBatch = 40 })
	const n = 250
	r1 := release("prod", 1, 0, n, nil, nil)
	for i := range r1.Targets {
		if i%2 == 0 {
			r1.Targets[i].OCIReference = fmt.Sprintf("registry.example/policy/host-%05d@%s", i, r1.Targets[i].ArtifactDigest)
		}
	}
	f.promote(t, r1)
	a := &recordingAttacher{}
	res, err := f.store.AttachDeliveryManifests(context.Background(), "prod", a)
	if err != nil {
		t.Fatal(err)
	}
	if res.AttachedCount != n/2 || res.SkippedCount != n/2 || len(a.refs) != n/2 ||
		len(res.Attached) != promoter.SkippedListed || len(res.Skipped) != promoter.SkippedListed {
		t.Fatalf("%d attached (%d listed, %d calls), %d skipped (%d listed); want %d and %d, %d listed each",
			res.AttachedCount, len(res.Attached), len(a.refs), res.SkippedCount, len(res.Skipped), n/2, n/2, promoter.SkippedListed)
	}
	for i := range promoter.SkippedListed {
		if want := fmt.Sprintf("host-%05d/svc", 2*i); res.Attached[i] != want {
			t.Fatalf("attached[%d] = %s, want %s", i, res.Attached[i], want)
		}
		if want := fmt.Sprintf("host-%05d/svc", 2*i+1); res.Skipped[i] != want {
			t.Fatalf("skipped[%d] = %s, want %s", i, res.Skipped[i], want)
		}
	}
}

// promotedRef promotes commit into store and returns the reference of the
// artifact it published for host/svc.
func promotedRef(t *testing.T, h *promotertest.Harness, store *promoter.Store, commit, host, svc string) string {
	t.Helper()
	o := h.Options(h.Repo.R1)
	o.Review.Commit, o.Store = commit, store
	res, err := h.Promote(t, o)
	if err != nil {
		t.Fatalf("promote %s: %v", commit, err)
	}
	var ref string
	for _, p := range res.Published {
		if strings.HasSuffix(p.Repository, "/"+host+"/"+svc) {
			ref = p.Ref()
		}
	}
	if ref == "" {
		t.Fatalf("promote %s published no artifact for %s/%s", commit, host, svc)
	}
	return ref
}
