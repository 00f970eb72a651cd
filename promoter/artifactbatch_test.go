package promoter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
)

// statementCounter counts the statements whose SQL contains match.
type statementCounter struct {
	match string
	n     atomic.Int64
}

func (a *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, a.match) {
		a.n.Add(1)
	}
	return ctx
}

func (a *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countingPool is a pool on a fresh database that counts the statements
// whose SQL contains match.
func countingPool(t *testing.T, match string) (*pgxpool.Pool, *statementCounter) {
	t.Helper()
	db := pgtest.New(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	stmts := &statementCounter{match: match}
	cfg.ConnConfig.Tracer = stmts
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, stmts
}

// artifactStore is a store on a fresh database whose pool counts the
// statements that insert artifacts, with a bound of about 4 artifacts of
// release 1 (40 targets, in) per statement.
func artifactStore(t *testing.T) (store *promoter.Store, pool *pgxpool.Pool, stmts *statementCounter, in promoter.ReleaseInput, size int) {
	t.Helper()
	pool, stmts = countingPool(t, "INSERT INTO configpub.artifact ")
	in = release("prod", 1, 0, 40, nil, nil)
	size = len(in.Targets[0].Values) // every fixture artifact is about this size
	opts := promoter.Options{Signer: newKey(t), Clock: func() time.Time { return t0 }}
	promoter.SetArtifactBatchBytes(&opts, 4*size+size/2) // 4 artifacts per statement
	store, err := promoter.Open(context.Background(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	return store, pool, stmts, in, size
}

// TestRecordsArtifactsInBoundedStatements: a release whose artifacts
// exceed the statement bound is recorded in several statements (one per
// bound's worth of bytes; an artifact larger than the bound alone), every
// target's exact bytes stored once; the next release, which shares most
// artifacts, stores only the new ones; and an artifact stored under
// another media type is refused whichever statement carries it, with
// nothing of that release recorded.
func TestRecordsArtifactsInBoundedStatements(t *testing.T) {
	ctx := context.Background()
	store, pool, stmts, in, size := artifactStore(t)
	if _, err := store.RecordAndActivate(ctx, in); err != nil {
		t.Fatal(err)
	}
	if got := stmts.n.Load(); got < 40/5 || got > 40/3 {
		t.Errorf("recorded 40 artifacts of %d bytes in %d statements of at most %d bytes, want about 10", size, got, 4*size+size/2)
	}
	for _, tg := range in.Targets {
		var b []byte
		if err := pool.QueryRow(ctx, `SELECT bytes FROM configpub.artifact WHERE artifact_digest = $1`, tg.ArtifactDigest).Scan(&b); err != nil || string(b) != string(tg.Values) {
			t.Fatalf("artifact %s of %s: %q, %v; want its bytes", tg.ArtifactDigest, tg.Host, b, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM configpub.artifact`).Scan(&n); err != nil || n != 40 {
		t.Fatalf("%d artifacts stored, %v; want 40", n, err)
	}

	// Release 2: 4 targets changed (0, 13, 26, 39), one of them to an artifact larger
	// than the bound.
	in2 := release("prod", 2, 1, 40, func(i int) bool { return i%13 == 0 }, func(int) int64 { return 1 })
	big := in2.Targets[13]
	big.Values = append(append([]byte{}, big.Values...), strings.Repeat("# padding\n", 6*size/10)...)
	big.ArtifactDigest = digest(big.Values)
	in2.Targets[13] = big
	before := stmts.n.Load()
	if _, err := store.RecordAndActivate(ctx, in2); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM configpub.artifact`).Scan(&n); err != nil || n != 44 {
		t.Fatalf("%d artifacts stored after release 2, %v; want 44", n, err)
	}
	if got := stmts.n.Load() - before; got < 40/5 {
		t.Errorf("release 2 took %d statements, want about 10 (the big artifact alone)", got)
	}

	// Release 3: the last target's artifact is one already stored, under
	// another media type.
	in3 := release("prod", 3, 2, 40, func(i int) bool { return i == 39 }, func(int) int64 { return 1 })
	last := &in3.Targets[39]
	last.Values, last.ArtifactDigest, last.MediaType = in.Targets[0].Values, in.Targets[0].ArtifactDigest, "application/vnd.example.other"
	_, err := store.RecordAndActivate(ctx, in3)
	if !errors.Is(err, promoter.ErrIntegrity) || !strings.Contains(err.Error(), in.Targets[0].ArtifactDigest) {
		t.Fatalf("release 3 with an artifact under another media type: %v, want ErrIntegrity naming %s", err, in.Targets[0].ArtifactDigest)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM configpub.config_release WHERE env_tag = 'prod' AND release_version = 3`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("release 3 recorded %d times after the refusal (%v), want 0", n, err)
	}
}

// TestRecordsArtifactsStoredAhead: StoreArtifacts stores a release's bytes
// in bounded statements before the recording, which then takes targets
// without bytes (ArtifactsStored) and references the rows; storing again is
// a no-op; a release naming an artifact that was not stored is refused
// naming the target and digest, with nothing recorded; bytes that do not
// hash to their digest, and a media type other than the stored one, are
// refused; an input that both says its artifacts are stored and carries
// bytes is invalid; and the same release recorded with its bytes inline is
// the same command (a replay).
func TestRecordsArtifactsStoredAhead(t *testing.T) {
	ctx := context.Background()
	store, pool, stmts, in, size := artifactStore(t)
	count := func(table string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM configpub."+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Half the artifacts stored: the recording names the first missing one.
	if err := store.StoreArtifacts(ctx, storedArtifacts(in)[:20]); err != nil {
		t.Fatal(err)
	}
	_, err := store.RecordAndActivate(ctx, headless(in))
	if !errors.Is(err, promoter.ErrInvalid) || !strings.Contains(err.Error(), in.Targets[20].ArtifactDigest) ||
		!strings.Contains(err.Error(), in.Targets[20].Host) || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("recording with 20 of 40 artifacts stored: %v, want ErrInvalid naming target 20 and its artifact", err)
	}
	if n := count("config_release"); n != 0 {
		t.Fatalf("%d releases recorded after the refusal, want 0", n)
	}

	before := stmts.n.Load()
	if err := store.StoreArtifacts(ctx, storedArtifacts(in)); err != nil {
		t.Fatal(err)
	}
	if got := stmts.n.Load() - before; got < 40/5 || got > 40/3 {
		t.Errorf("stored 40 artifacts in %d statements of at most %d bytes, want about 10", got, 4*size+size/2)
	}
	if err := store.StoreArtifacts(ctx, storedArtifacts(in)); err != nil {
		t.Fatalf("storing the same artifacts again: %v", err)
	}
	if n := count("artifact"); n != 40 {
		t.Fatalf("%d artifacts stored, want 40", n)
	}
	before = stmts.n.Load()
	res, err := store.RecordAndActivate(ctx, headless(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := stmts.n.Load() - before; got != 0 {
		t.Errorf("the recording of stored artifacts inserted artifacts in %d statements, want none", got)
	}
	if res.Moved != 40 {
		t.Fatalf("moved %d pointers, want 40", res.Moved)
	}
	for _, tg := range in.Targets {
		var b []byte
		if err := pool.QueryRow(ctx, `SELECT a.bytes FROM configpub.current_pointer p
			JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
			JOIN configpub.artifact a ON a.artifact_digest = s.artifact_digest
			WHERE p.host = $1 AND p.service_id = $2`, tg.Host, tg.ServiceID).Scan(&b); err != nil || string(b) != string(tg.Values) {
			t.Fatalf("served bytes of %s: %q, %v; want its artifact", tg.Host, b, err)
		}
	}
	// The same release with its bytes inline is the same command.
	again, err := store.RecordAndActivate(ctx, in)
	if err != nil || !again.Replayed {
		t.Fatalf("re-recording with the bytes inline: %+v, %v; want a replay", again, err)
	}

	// Bad artifacts are refused before anything is stored.
	bad := storedArtifacts(in)[:1]
	bad[0].Bytes = []byte("tampered: true\n")
	if err := store.StoreArtifacts(ctx, bad); !errors.Is(err, promoter.ErrIntegrity) || !strings.Contains(err.Error(), in.Targets[0].ArtifactDigest) {
		t.Errorf("storing bytes under another digest: %v, want ErrIntegrity naming %s", err, in.Targets[0].ArtifactDigest)
	}
	other := storedArtifacts(in)[:1]
	other[0].MediaType = "application/vnd.example.other"
	if err := store.StoreArtifacts(ctx, other); !errors.Is(err, promoter.ErrIntegrity) || !strings.Contains(err.Error(), "application/vnd.example.other") && !strings.Contains(err.Error(), "media type") {
		t.Errorf("storing an artifact under another media type: %v, want ErrIntegrity", err)
	}
	if n := count("artifact"); n != 40 {
		t.Fatalf("%d artifacts stored after the refusals, want 40", n)
	}

	// Release 2 names a stored artifact under another media type.
	in2 := release("prod", 2, 1, 40, func(i int) bool { return i == 39 }, func(int) int64 { return 1 })
	if err := store.StoreArtifacts(ctx, storedArtifacts(in2)[:39]); err != nil {
		t.Fatal(err)
	}
	h2 := headless(in2)
	h2.Targets[39].ArtifactDigest, h2.Targets[39].MediaType = in.Targets[0].ArtifactDigest, "application/vnd.example.other"
	if _, err := store.RecordAndActivate(ctx, h2); !errors.Is(err, promoter.ErrIntegrity) || !strings.Contains(err.Error(), "media type") {
		t.Fatalf("recording a stored artifact under another media type: %v, want ErrIntegrity", err)
	}
	// Bytes and ArtifactsStored together are refused.
	mixed := headless(in2)
	mixed.Targets[3].Values = in2.Targets[3].Values
	if _, err := store.RecordAndActivate(ctx, mixed); !errors.Is(err, promoter.ErrInvalid) || !strings.Contains(err.Error(), "artifactsStored") {
		t.Fatalf("recording stored artifacts with bytes: %v, want ErrInvalid naming artifactsStored", err)
	}
	if n := count("config_release"); n != 1 {
		t.Fatalf("%d releases recorded after the refusals, want 1", n)
	}
}

// TestRecordsSnapshotsInBatches: with 3 snapshots per statement, a release
// of 10 targets is recorded in 4 statements inside its one transaction;
// a later release whose third batch holds a snapshot claimed by another
// identity, or one stored with other content, is refused whole: no
// snapshot of its earlier batches stays, no release row, pointers unmoved.
func TestRecordsSnapshotsInBatches(t *testing.T) {
	ctx := context.Background()
	pool, stmts := countingPool(t, "INSERT INTO configpub.config_snapshot ")
	opts := promoter.Options{Signer: newKey(t), Clock: func() time.Time { return t0 }}
	promoter.SetSnapshotBatch(&opts, 3)
	store, err := promoter.Open(ctx, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	r1 := release("prod", 1, 0, 10, nil, nil)
	if res, err := store.RecordAndActivate(ctx, r1); err != nil || res.Moved != 10 {
		t.Fatalf("release 1: %+v, %v; want 10 moved", res, err)
	}
	if got := stmts.n.Load(); got != 4 {
		t.Errorf("recorded 10 snapshots in %d statements, want 4 (3 per statement)", got)
	}
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM configpub.config_snapshot WHERE release_version = 1`); n != 10 {
		t.Fatalf("%d snapshots of release 1, want 10", n)
	}
	for _, tc := range []struct {
		name  string
		spoil func(in *promoter.ReleaseInput)
		want  error
	}{
		{"another identity's snapshot", func(in *promoter.ReleaseInput) {
			stolen := r1.Targets[1]
			stolen.Host, stolen.ServiceID = in.Targets[8].Host, in.Targets[8].ServiceID
			in.Targets[8] = stolen
		}, promoter.ErrIdentityMismatch},
		{"a stored snapshot with other content", func(in *promoter.ReleaseInput) {
			other := r1.Targets[8]
			other.ContentDigest = digest([]byte("other content"))
			in.Targets[8] = other
		}, promoter.ErrIntegrity},
	} {
		r2 := release("prod", 2, 1, 10, nil, nil)
		tc.spoil(&r2)
		if _, err := store.RecordAndActivate(ctx, r2); !errors.Is(err, tc.want) {
			t.Fatalf("%s in the third batch: %v, want %v", tc.name, err, tc.want)
		}
		if n := count(`SELECT count(*) FROM configpub.config_snapshot WHERE release_version = 2`); n != 0 {
			t.Fatalf("%s: %d snapshots of the refused release stayed, want 0", tc.name, n)
		}
		if n := count(`SELECT count(*) FROM configpub.config_release WHERE release_version = 2`); n != 0 {
			t.Fatalf("%s: the refused release was recorded", tc.name)
		}
		if n := count(`SELECT count(*) FROM configpub.current_pointer p JOIN configpub.config_snapshot s USING (snapshot_id) WHERE s.release_version = 1`); n != 10 {
			t.Fatalf("%s: %d pointers at release 1, want 10", tc.name, n)
		}
	}
}
