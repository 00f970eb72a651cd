package promoter_test

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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fixture is a store on a fresh database with a fixed clock.
type fixture struct {
	db    *pgtest.DB
	pool  *pgxpool.Pool
	store *promoter.Store
	key   *ecdsa.PrivateKey
	now   time.Time
}

func newFixture(t testing.TB, mod func(*promoter.Options)) *fixture {
	t.Helper()
	db := pgtest.New(t)
	f := &fixture{db: db, pool: db.Pool(t), key: newKey(t), now: t0}
	f.store = f.open(t, mod)
	return f
}

func (f *fixture) open(t testing.TB, mod func(*promoter.Options)) *promoter.Store {
	t.Helper()
	opts := promoter.Options{Signer: f.key, Clock: func() time.Time { return f.now }}
	if mod != nil {
		mod(&opts)
	}
	s, err := promoter.Open(context.Background(), f.pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// id is a deterministic command UUID named by parts.
func id(parts ...any) string { return promotertest.ID(parts...) }

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// release builds release `version` of env on base: n targets; a target's
// snapshot is new in this release when changed(i) is true, else it is the
// snapshot of the release given by keep(i) (deterministic, so it equals
// what an earlier release recorded).
func release(env string, version, base int64, n int, changed func(i int) bool, keep func(i int) int64) promoter.ReleaseInput {
	in := promoter.ReleaseInput{
		CommandID:          id("cmd", env, version, "promote"),
		EnvTag:             env,
		ReleaseVersion:     version,
		BaseReleaseVersion: base,
		ManifestBytes:      []byte(fmt.Sprintf("envTag: %s\nreleaseVersion: %d\ntargets: %d\n", env, version, n)),
		SourceCommit:       fmt.Sprintf("%040x", version),
		SourceRef:          "refs/heads/main",
		Actor:              "Alice <alice@example.com>",
		Reviewers:          []string{"Bob <bob@example.com>"},
		Reason:             fmt.Sprintf("release %d", version),
	}
	in.ReleaseDigest = digest(in.ManifestBytes)
	for i := 0; i < n; i++ {
		created := version
		if changed != nil && !changed(i) {
			created = keep(i)
		}
		in.Targets = append(in.Targets, target(env, i, created, changed == nil || changed(i)))
	}
	return in
}

// target is target i's snapshot as created by release `created`.
func target(env string, i int, created int64, isChanged bool) promoter.Target {
	host, svc := fmt.Sprintf("host-%05d", i), "svc"
	values := []byte(fmt.Sprintf("runtimePolicy:\n  host: %s\n  releaseVersion: %d\nagentPolicy:\n  limit: %d\n", host, created, i))
	return promoter.Target{
		Host: host, ServiceID: svc, EnvTag: env, Audience: "agent",
		SnapshotID:       id("snap", env, i, created),
		PublicationID:    id("pub", env, created),
		PolicySnapshotID: id("pol", env, i, created),
		ReleaseVersion:   created, PolicyVersion: created,
		PolicyDigest: digest([]byte(fmt.Sprint("p", i, created))), ContentDigest: digest([]byte(fmt.Sprint("c", i, created))),
		PropertySetDigest: digest([]byte(fmt.Sprint("ps", i))), ArtifactDigest: digest(values),
		CompatibilityGeneration: 1, SourceEventSequence: created,
		CreatedAt: t0.Add(time.Duration(created) * time.Hour),
		// An activation window opening before the fixture clock's start.
		ValidFrom: t0.Add(-time.Hour), ExpiresAt: t0.Add(time.Duration(created)*time.Hour + 21*24*time.Hour),
		Changed: isChanged, LeaseProfile: "standard",
		Lease:        promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute},
		InputDigests: map[string]string{"policies/agent.yaml": digest([]byte(fmt.Sprint(i)))},
		Values:       values,
	}
}

func (f *fixture) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// pointers returns identity -> snapshot id of env's current pointers.
func (f *fixture) pointers(t testing.TB, env string) map[string]string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(),
		"SELECT host || '/' || service_id, snapshot_id::text FROM configpub.current_pointer WHERE env_tag = $1", env)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		m[k] = v
	}
	return m
}

// wantPointersAt fails unless every pointer of in's targets is at in's
// snapshot and no other pointer exists.
func (f *fixture) wantPointersAt(t testing.TB, in promoter.ReleaseInput) {
	t.Helper()
	got := f.pointers(t, in.EnvTag)
	if len(got) != len(in.Targets) {
		t.Fatalf("got %d pointers, want %d (release %d)", len(got), len(in.Targets), in.ReleaseVersion)
	}
	for _, tg := range in.Targets {
		if k := tg.Host + "/" + tg.ServiceID; got[k] != tg.SnapshotID {
			t.Fatalf("pointer %s at %s, want %s (release %d)", k, got[k], tg.SnapshotID, in.ReleaseVersion)
		}
	}
}

// checkJournal fails unless every release's journal sequences are exactly
// 1..row_revision.
func (f *fixture) checkJournal(t testing.TB) {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT r.env_tag, r.release_version, r.row_revision,
		count(j.*), coalesce(min(j.sequence), 0), coalesce(max(j.sequence), 0)
		FROM configpub.config_release r LEFT JOIN configpub.config_release_journal j
		ON j.env_tag = r.env_tag AND j.release_version = r.release_version
		GROUP BY 1, 2, 3`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var env string
		var v, rev, n, lo, hi int64
		if err := rows.Scan(&env, &v, &rev, &n, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if n != rev || lo != 1 || hi != rev {
			t.Errorf("release %s/%d: revision %d, journal has %d rows %d..%d, want 1..%d", env, v, rev, n, lo, hi, rev)
		}
	}
}

// promote records and activates in, failing the test on error.
func (f *fixture) promote(t testing.TB, in promoter.ReleaseInput) *promoter.ActivationResult {
	t.Helper()
	res, err := f.store.RecordAndActivate(context.Background(), in)
	if err != nil {
		t.Fatalf("promote release %d: %v", in.ReleaseVersion, err)
	}
	return res
}
