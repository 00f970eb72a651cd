package configserver_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/promoter"
)

// lifecycleStore is a promoter store (as configpub_promoter) with an
// injected clock on e's database.
type lifecycleStore struct {
	*promoter.Store
	mu  sync.Mutex
	now time.Time
}

func newLifecycleStore(t *testing.T, e *env) *lifecycleStore {
	t.Helper()
	ls := &lifecycleStore{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	ls.Store, _ = e.openPromoter(t, func() time.Time { ls.mu.Lock(); defer ls.mu.Unlock(); return ls.now })
	return ls
}

func (ls *lifecycleStore) advance(d time.Duration) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.now = ls.now.Add(d)
}

func lifecycleID(i int) bundle.Identity {
	return bundle.Identity{Host: fmt.Sprintf("host-%d", i), ServiceID: "gw", EnvTag: "prod"}
}

// lifecycleTarget is target i's gateway snapshot created by release
// `created` (every snapshot of one release shares its publication).
func lifecycleTarget(i int, created int64, changed bool) promoter.Target {
	body := []byte(fmt.Sprintf("runtimePolicy:\n  host: host-%d\n  releaseVersion: %d\ngatewayPolicy: {}\n", i, created))
	ns := func(parts ...any) string {
		return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(parts...))).String()
	}
	t0 := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	id := lifecycleID(i)
	return promoter.Target{
		Host: id.Host, ServiceID: id.ServiceID, EnvTag: id.EnvTag, Audience: "gateway",
		SnapshotID: ns("snap", i, created), PublicationID: ns("pub", created), PolicySnapshotID: ns("pol", i, created),
		ReleaseVersion: created, PolicyVersion: created,
		PolicyDigest: digestOf([]byte(fmt.Sprint("p", i, created))), ContentDigest: digestOf([]byte(fmt.Sprint("c", i, created))),
		PropertySetDigest: digestOf([]byte("ps")), ArtifactDigest: digestOf(body), Values: body,
		CreatedAt: t0, ValidFrom: t0, ExpiresAt: t0.Add(21 * 24 * time.Hour), Changed: changed, LeaseProfile: "production",
		Lease: promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute},
	}
}

func lifecycleRelease(version int64, ts ...promoter.Target) promoter.ReleaseInput {
	return promoter.ReleaseInput{
		CommandID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint("cmd", version))).String(), EnvTag: "prod",
		ReleaseVersion: version, BaseReleaseVersion: version - 1,
		ManifestBytes: []byte(fmt.Sprintf("release %d\n", version)), Actor: "ci", Reason: fmt.Sprintf("release %d", version),
		Targets: ts,
	}
}

// waitAnswer polls HEAD /configs for id until it answers want (and, for
// 200, serves snapshot), failing unless that happens within a second.
func waitAnswer(t *testing.T, e *env, id bundle.Identity, want int, snapshot string) {
	t.Helper()
	tok := e.token(t, id, "gateway")
	start := time.Now()
	for {
		resp, _ := e.do(t, http.MethodHead, configsPath(id), tok)
		if resp.StatusCode == want && (want != http.StatusOK || resp.Header.Get("X-Config-Snapshot-Id") == snapshot) {
			return
		}
		if time.Since(start) > time.Second {
			t.Fatalf("%s: got %d (snapshot %q) a second after the commit, want %d %s", id, resp.StatusCode,
				resp.Header.Get("X-Config-Snapshot-Id"), want, snapshot)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRetiredIdentityIsGoneAndMovesRestoreExactMappings: release 2 drops
// target 2 and adds target 3. After its activation the dropped identity
// gets 410 Gone (within a second) and no renewal; a rollback to 1 restores
// exactly release 1's mapping (3 gone, 2 back); a forward activation
// restores release 2's.
func TestRetiredIdentityIsGoneAndMovesRestoreExactMappings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ls := newLifecycleStore(t, e)
	ctx := context.Background()
	r1 := lifecycleRelease(1, lifecycleTarget(0, 1, true), lifecycleTarget(1, 1, true), lifecycleTarget(2, 1, true))
	r2 := lifecycleRelease(2, lifecycleTarget(0, 2, true), lifecycleTarget(1, 1, false), lifecycleTarget(3, 2, true))
	if _, err := ls.RecordAndActivate(ctx, r1); err != nil {
		t.Fatal(err)
	}
	for i, tg := range r1.Targets {
		waitAnswer(t, e, lifecycleID(i), http.StatusOK, tg.SnapshotID)
	}
	waitAnswer(t, e, lifecycleID(3), http.StatusNotFound, "")

	ls.advance(time.Minute)
	if _, err := ls.RecordAndActivate(ctx, r2); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, lifecycleID(2), http.StatusGone, "")
	waitAnswer(t, e, lifecycleID(3), http.StatusOK, r2.Targets[2].SnapshotID)
	waitAnswer(t, e, lifecycleID(0), http.StatusOK, r2.Targets[0].SnapshotID)
	resp, body := e.do(t, http.MethodGet, configsPath(lifecycleID(2)), e.token(t, lifecycleID(2), "gateway"))
	if resp.StatusCode != http.StatusGone || resp.Header.Get("Content-Type") != "application/json" || len(body) == 0 {
		t.Fatalf("GET of the retired identity: got %d %q %q, want a 410 JSON error", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	// No renewal for the retired identity: it stays 410 and its stored
	// lease is not extended.
	var before time.Time
	if err := e.db.Pool(t).QueryRow(ctx, `SELECT lease_expires_at FROM configpub.current_pointer WHERE host = 'host-2'`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	ls.advance(4 * time.Minute)
	ren, err := ls.RenewLeases(ctx, "prod")
	if err != nil || ren.Renewed != 3 {
		t.Fatalf("renew got %+v, %v; want 3 renewed (the retired identity skipped)", ren, err)
	}
	var after time.Time
	if err := e.db.Pool(t).QueryRow(ctx, `SELECT lease_expires_at FROM configpub.current_pointer WHERE host = 'host-2'`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !after.Equal(before) {
		t.Fatalf("the retired identity's lease was renewed: %s -> %s", before, after)
	}
	waitAnswer(t, e, lifecycleID(2), http.StatusGone, "")

	// Rollback to 1: exactly release 1's mapping.
	ls.advance(time.Minute)
	if _, err := ls.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "restore"}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, lifecycleID(3), http.StatusGone, "")
	for i, tg := range r1.Targets {
		waitAnswer(t, e, lifecycleID(i), http.StatusOK, tg.SnapshotID)
	}

	// Forward activation: exactly release 2's.
	ls.advance(time.Minute)
	if _, err := ls.Activate(ctx, promoter.MoveInput{CommandID: uuid.NewString(), EnvTag: "prod", Release: 2,
		Actor: "oncall", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, lifecycleID(2), http.StatusGone, "")
	for i, tg := range r2.Targets {
		waitAnswer(t, e, lifecycleID([]int{0, 1, 3}[i]), http.StatusOK, tg.SnapshotID)
	}
}

// TestRevokePublicationStopsServingEverySnapshotItCreated: every snapshot
// of release 1 shares its publication; revoking it stops the Config Server
// serving all of them within a second, while release 2's snapshot stays.
func TestRevokePublicationStopsServingEverySnapshotItCreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ls := newLifecycleStore(t, e)
	ctx := context.Background()
	r1 := lifecycleRelease(1, lifecycleTarget(0, 1, true), lifecycleTarget(1, 1, true), lifecycleTarget(2, 1, true))
	r2 := lifecycleRelease(2, lifecycleTarget(0, 2, true), lifecycleTarget(1, 1, false), lifecycleTarget(2, 1, false))
	for _, r := range []promoter.ReleaseInput{r1, r2} {
		if _, err := ls.RecordAndActivate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for i, tg := range r2.Targets {
		waitAnswer(t, e, lifecycleID(i), http.StatusOK, tg.SnapshotID)
	}
	pub := r1.Targets[0].PublicationID
	if r1.Targets[1].PublicationID != pub || r1.Targets[2].PublicationID != pub {
		t.Fatal("the fixture's release 1 snapshots do not share one publication")
	}
	res, err := ls.Revoke(ctx, promoter.RevokeInput{CommandID: uuid.NewString(), PublicationID: pub, Reason: "leak", Actor: "sec"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Current) != 2 {
		t.Fatalf("revocation names %v as current, want the 2 identities still on release 1's snapshots", res.Current)
	}
	waitAnswer(t, e, lifecycleID(1), http.StatusNotFound, "")
	waitAnswer(t, e, lifecycleID(2), http.StatusNotFound, "")
	waitAnswer(t, e, lifecycleID(0), http.StatusOK, r2.Targets[0].SnapshotID)
	// Nothing of the revoked publication is activated again.
	if _, err := ls.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "r"}); err == nil {
		t.Fatal("rollback to a release of a revoked publication succeeded")
	}
}
