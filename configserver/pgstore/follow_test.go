package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/pointernote"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// execer is a pool or an open transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// seed writes snapshots and pointers as the database owner, the way the
// promoter does (the store checks the manifest's fields, not its signature:
// runtimes verify that).
type seed struct {
	owner *pgxpool.Pool
	seq   int64
	// expires, when set, is the ExpiresAt of the manifests move writes
	// (default: an hour from now).
	expires time.Time
}

type snap struct {
	id                                   bundle.Identity
	snapshotID, publicationID            string
	artifact, content, policy, propertys string
	release                              int64
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

func testIdentity(i int) bundle.Identity {
	return bundle.Identity{Host: fmt.Sprintf("h%05d.example", i), ServiceID: "gw", EnvTag: "prod"}
}

// snapshot stores an artifact and a snapshot of id for release.
func (s *seed) snapshot(t testing.TB, q execer, id bundle.Identity, release int64) *snap {
	t.Helper()
	body := fmt.Sprintf("runtimePolicy:\n  host: %s\n  release: %d\n", id.Host, release)
	sn := &snap{id: id, snapshotID: uuid.NewString(), publicationID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "pub%d", release)).String(),
		artifact: sha(body), content: sha("c" + body), policy: sha("p" + body), propertys: sha("props"), release: release}
	ctx := context.Background()
	if _, err := q.Exec(ctx, `INSERT INTO configpub.artifact (artifact_digest, media_type, bytes, size)
		VALUES ($1, 'application/yaml', $2, $3) ON CONFLICT DO NOTHING`, sn.artifact, []byte(body), len(body)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO configpub.config_snapshot (snapshot_id, host, service_id, env_tag, audience,
		publication_id, policy_snapshot_id, policy_version, release_version, artifact_digest, content_digest,
		policy_digest, property_set_digest, schema_version, compatibility_generation, revocation_epoch, created_at)
		VALUES ($1, $2, $3, $4, 'gateway', $5, gen_random_uuid(), 1, $6, $7, $8, $9, $10, 1, 0, 0, now())`,
		sn.snapshotID, id.Host, id.ServiceID, id.EnvTag, sn.publicationID, release, sn.artifact, sn.content, sn.policy, sn.propertys); err != nil {
		t.Fatal(err)
	}
	return sn
}

// move upserts sn's pointer on q (a pool, or an open transaction), without
// a NOTIFY unless notify is set.
func (s *seed) move(t testing.TB, q execer, sn *snap, notify string) {
	t.Helper()
	s.seq++
	now := time.Now().UTC().Truncate(time.Second)
	expires := now.Add(time.Hour)
	if !s.expires.IsZero() {
		expires = s.expires
	}
	m := &bundle.DeliveryManifest{Type: bundle.DeliveryManifestType, Host: sn.id.Host, ServiceID: sn.id.ServiceID,
		EnvTag: sn.id.EnvTag, Audience: "gateway", SnapshotID: sn.snapshotID, PublicationID: sn.publicationID,
		PolicySnapshotID: uuid.NewString(), ReleaseVersion: sn.release, ArtifactDigest: sn.artifact,
		ContentDigest: sn.content, PolicyDigest: sn.policy, PropertySetDigest: sn.propertys, SchemaVersion: 1,
		Sequence: s.seq, IssuedAt: now.Format(time.RFC3339), ValidFrom: now.Format(time.RFC3339),
		RefreshAfter: now.Add(time.Minute).Format(time.RFC3339), ExpiresAt: expires.Format(time.RFC3339)}
	raw, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := q.Exec(ctx, `INSERT INTO configpub.current_pointer (host, service_id, env_tag, snapshot_id,
		release_version, sequence, manifest, manifest_signature, manifest_key_id, lease_valid_from,
		lease_refresh_after, lease_expires_at, moved_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'test-signature', 'sha256:test-key', $8, $8, $8, now(), now())
		ON CONFLICT (host, service_id, env_tag) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id,
		release_version = EXCLUDED.release_version, sequence = EXCLUDED.sequence, manifest = EXCLUDED.manifest,
		moved_at = now(), updated_at = now(), retired_at = NULL, retired_release_version = NULL`,
		sn.id.Host, sn.id.ServiceID, sn.id.EnvTag, sn.snapshotID, sn.release, s.seq, raw, now); err != nil {
		t.Fatal(err)
	}
	if notify != "" {
		if _, err := q.Exec(ctx, pointernote.SendSQL, notify); err != nil {
			t.Fatal(err)
		}
	}
}

func newSeed(t testing.TB) (*pgtest.DB, *pgxpool.Pool, *seed) {
	t.Helper()
	db := pgtest.New(t)
	owner := db.Pool(t)
	return db, owner, &seed{owner: owner}
}

// wantOnlyFirstLoad fails unless st reloaded every pointer only once (when
// it started): every later change was read by the watermark.
func wantOnlyFirstLoad(t testing.TB, st *Store) {
	t.Helper()
	if n := st.reconciles.Load(); n != 1 {
		t.Fatalf("%d full reconciles, want only the first load (changes are read by the watermark)", n)
	}
}

// runStore starts a Store on url and waits until it is ready.
func runStore(t testing.TB, url string, opts Options) *Store {
	t.Helper()
	poolCfg, err := PoolConfig(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), poolCfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; pool.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for st.Ready(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("store not ready: %v", st.Ready(ctx))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return st
}

// servedSnapshot is the snapshot id Current serves for id, or the error.
func servedSnapshot(st *Store, id bundle.Identity) (string, error) {
	d, err := st.Current(context.Background(), id)
	if err != nil {
		return "", err
	}
	return d.SnapshotID, nil
}

// waitServed waits until st serves want for id and returns when it did.
func waitServed(t testing.TB, st *Store, id bundle.Identity, want string, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := servedSnapshot(st, id)
		if got == want {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: serves %q (%v) after %s, want %s", id, got, err, within, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitRounds waits until st has completed n more catch-up rounds.
func waitRounds(t testing.TB, st *Store, n uint64) {
	t.Helper()
	target := st.catchUps.Load() + n
	deadline := time.Now().Add(10 * time.Second)
	for st.catchUps.Load() < target {
		if time.Now().After(deadline) {
			t.Fatalf("no %d catch-up rounds within 10s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A follower without NOTIFY sees every committed move, including one whose
// transaction began (and took its id) before a move that committed first
// and was already followed: a watermark of "the highest id seen" would
// skip it for ever.
func TestFollowSeesMovesCommittedOutOfIdOrder(t *testing.T) {
	ctx := context.Background()
	db, owner, sd := newSeed(t)
	a, b := testIdentity(1), testIdentity(2)
	a1, b1 := sd.snapshot(t, owner, a, 1), sd.snapshot(t, owner, b, 1)
	sd.move(t, owner, a1, "")
	sd.move(t, owner, b1, "")
	a2, b2 := sd.snapshot(t, owner, a, 2), sd.snapshot(t, owner, b, 2)

	st := runStore(t, db.URLFor(t, "configpub_server"), Options{FollowInterval: 20 * time.Millisecond})
	waitServed(t, st, a, a1.snapshotID, time.Second)

	early, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(ctx)
	var earlyXID string
	if err := early.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&earlyXID); err != nil {
		t.Fatal(err)
	}
	sd.move(t, early, a2, "") // written, not committed
	sd.move(t, owner, b2, "") // a later transaction, committed first
	waitServed(t, st, b, b2.snapshotID, 2*time.Second)
	waitRounds(t, st, 2) // the watermark has moved past the later transaction
	st.mu.RLock()
	wm := *st.wm
	st.mu.RUnlock()
	if len(wm.xip) == 0 || wm.xip[0] != earlyXID {
		t.Fatalf("watermark %+v: want the open transaction %s among those in progress", wm, earlyXID)
	}
	if got, _ := servedSnapshot(st, a); got != a1.snapshotID {
		t.Fatalf("%s served %s before its move committed", a, got)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitServed(t, st, a, a2.snapshotID, 2*time.Second)
	wantOnlyFirstLoad(t, st)
}

// A revocation recorded since the watermark reloads every pointer: the
// revoked snapshot's identity is no longer served. A retirement is read
// as a changed pointer (410 Gone).
func TestFollowSeesRevocationsAndRetirements(t *testing.T) {
	ctx := context.Background()
	db, owner, sd := newSeed(t)
	a, b := testIdentity(1), testIdentity(2)
	a1, b1 := sd.snapshot(t, owner, a, 1), sd.snapshot(t, owner, b, 1)
	sd.move(t, owner, a1, "")
	sd.move(t, owner, b1, "")
	st := runStore(t, db.URLFor(t, "configpub_server"), Options{FollowInterval: 20 * time.Millisecond})
	waitServed(t, st, a, a1.snapshotID, time.Second)

	if _, err := owner.Exec(ctx, `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		VALUES ($1, 'test', 'test', now())`, a1.snapshotID); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `UPDATE configpub.current_pointer SET retired_at = now(), retired_release_version = 2
		WHERE host = $1`, b.Host); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, errA := st.Current(ctx, a)
		_, errB := st.Current(ctx, b)
		if errors.Is(errA, configserver.ErrNotFound) && errors.Is(errB, configserver.ErrGone) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after revoking %s and retiring %s: %v, %v; want not found and gone", a, b, errA, errB)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := st.reconciles.Load(); n < 2 {
		t.Fatalf("%d full reconciles: a revocation must reload every pointer", n)
	}
}

// A listener reads a notification that names no single identity (one
// per batch or per host) as "something changed": it reads what changed
// since the watermark.
func TestListenerFollowsNotificationsThatNameNoIdentity(t *testing.T) {
	db, owner, sd := newSeed(t)
	ids := []bundle.Identity{testIdentity(1), testIdentity(2), testIdentity(3)}
	var v2 []*snap
	for _, id := range ids {
		sd.move(t, owner, sd.snapshot(t, owner, id, 1), "")
		v2 = append(v2, sd.snapshot(t, owner, id, 2))
	}
	st := runStore(t, db.URLFor(t, "configpub_server"), Options{ReconcileInterval: time.Hour})
	err := pgx.BeginFunc(context.Background(), owner, func(tx pgx.Tx) error {
		for i, sn := range v2 {
			note := ""
			if i == len(v2)-1 {
				note = `{"batch":1,"envTag":"prod","count":3}`
			}
			sd.move(t, tx, sn, note)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		waitServed(t, st, id, v2[i].snapshotID, time.Second)
	}
	wantOnlyFirstLoad(t, st)
}

// A Config Server reading a hot standby (a real streaming replica made with
// pg_basebackup) follows pointer moves committed on the primary without
// NOTIFY (not replicated): each reaches it within 1 s of the standby
// replaying it.
func TestReplicaFollowWithinOneSecondOfReplay(t *testing.T) {
	ctx := context.Background()
	db, owner, sd := newSeed(t)
	id := testIdentity(1)
	cur := sd.snapshot(t, owner, id, 1)
	sd.move(t, owner, cur, "")
	const interval = 200 * time.Millisecond
	st := runStore(t, db.ReplicaURLFor(t, "configpub_server"), Options{FollowInterval: interval})
	waitServed(t, st, id, cur.snapshotID, 2*time.Second)
	replica, err := pgx.Connect(ctx, db.ReplicaURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close(ctx)

	var worstReplay, worstVisible time.Duration
	for rel := int64(2); rel <= 6; rel++ {
		next := sd.snapshot(t, owner, id, rel)
		committed := time.Now()
		sd.move(t, owner, next, `{"host":"ignored: NOTIFY is not replicated"}`)
		// Replayed: the standby has the row.
		var replayed time.Time
		for deadline := time.Now().Add(10 * time.Second); ; {
			var got string
			var replayTS time.Time
			if err := replica.QueryRow(ctx, `SELECT snapshot_id::text, coalesce(pg_last_xact_replay_timestamp(), 'epoch')
				FROM configpub.current_pointer WHERE host = $1`, id.Host).Scan(&got, &replayTS); err != nil {
				t.Fatal(err)
			}
			if got == next.snapshotID {
				replayed = time.Now()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("release %d: the standby did not replay the move within 10s", rel)
			}
			time.Sleep(time.Millisecond)
		}
		visible := waitServed(t, st, id, next.snapshotID, 5*time.Second)
		worstReplay = max(worstReplay, replayed.Sub(committed))
		worstVisible = max(worstVisible, visible.Sub(replayed))
		if d := visible.Sub(replayed); d > time.Second {
			t.Errorf("release %d: served %s after the standby replayed the move, want <= 1s", rel, d.Round(time.Millisecond))
		}
	}
	t.Logf("5 moves, follow interval %s: COMMIT -> replayed on the standby max %s; replayed -> served max %s",
		interval, worstReplay.Round(time.Millisecond), worstVisible.Round(time.Millisecond))
	wantOnlyFirstLoad(t, st)
}

// A store given a hot standby without FollowInterval notices it (LISTEN is
// refused there) and follows it by polling.
func TestStoreOnAStandbyFollowsWithoutBeingTold(t *testing.T) {
	db, owner, sd := newSeed(t)
	id := testIdentity(1)
	sd.move(t, owner, sd.snapshot(t, owner, id, 1), "")
	st := runStore(t, db.ReplicaURLFor(t, "configpub_server"), Options{})
	next := sd.snapshot(t, owner, id, 2)
	sd.move(t, owner, next, "")
	db.WaitReplayed(t)
	waitServed(t, st, id, next.snapshotID, 2*DefaultFollowInterval+time.Second)
	wantOnlyFirstLoad(t, st)
}

// QueryTimeout bounds how long the database may keep the store waiting,
// not how long loading every pointer may take: a start-up load and a
// catch-up that stream far longer than it still complete.
func TestLoadStreamsLongerThanQueryTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 5,000 identities")
	}
	db := pgtest.New(t)
	const n = 5000
	renew := scaleSeed(t, db, n)
	const timeout = 300 * time.Millisecond
	t0 := time.Now()
	st := runStore(t, db.URLFor(t, "configpub_server"), Options{QueryTimeout: timeout, ReconcileInterval: time.Hour, StaleAfter: time.Minute})
	loaded := time.Since(t0)
	if got := st.Stats().Pointers; got != n {
		t.Fatalf("loaded %d pointers, want %d", got, n)
	}
	first, err := st.Current(context.Background(), testIdentity(0))
	if err != nil {
		t.Fatal(err)
	}
	renew()
	conn, err := pgx.Connect(context.Background(), db.URLFor(t, "configpub_server"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	t0 = time.Now()
	if err := st.catchUp(context.Background(), conn); err != nil {
		t.Fatalf("catch-up of %d re-signed pointers with a %s query timeout: %v", n, timeout, err)
	}
	// Every pointer serves its re-signed lease (most chunks were made
	// current while the rows still streamed).
	for i := range n {
		d, err := st.Current(context.Background(), testIdentity(i))
		if err != nil {
			t.Fatalf("%s after the catch-up: %v", testIdentity(i), err)
		}
		if d.ValidFrom == first.ValidFrom || d.Identity != testIdentity(i) {
			t.Fatalf("%s after the catch-up: serves %s with the lease from %s; want its re-signed lease",
				testIdentity(i), d.Identity, d.ValidFrom)
		}
	}
	if got := st.Stats().Pointers; got != n {
		t.Fatalf("%d pointers after the catch-up, want %d", got, n)
	}
	t.Logf("%d pointers loaded in %s, caught up after a re-sign of all in %s, query timeout %s",
		n, loaded.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), timeout)
}
