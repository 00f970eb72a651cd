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

// artifactStatements counts the statements that insert artifacts.
type artifactStatements struct{ n atomic.Int64 }

func (a *artifactStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "INSERT INTO configpub.artifact ") {
		a.n.Add(1)
	}
	return ctx
}

func (a *artifactStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestRecordsArtifactsInBoundedStatements: a release whose artifacts
// exceed the statement bound is recorded in several statements (one per
// bound's worth of bytes; an artifact larger than the bound alone), every
// target's exact bytes stored once; the next release, which shares most
// artifacts, stores only the new ones; and an artifact stored under
// another media type is refused whichever statement carries it, with
// nothing of that release recorded.
func TestRecordsArtifactsInBoundedStatements(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	var stmts artifactStatements
	cfg.ConnConfig.Tracer = &stmts
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	now := t0
	in := release("prod", 1, 0, 40, nil, nil)
	size := len(in.Targets[0].Values) // every fixture artifact is about this size
	opts := promoter.Options{Signer: newKey(t), Clock: func() time.Time { return now }}
	promoter.SetArtifactBatchBytes(&opts, 4*size+size/2) // 4 artifacts per statement
	store, err := promoter.Open(ctx, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
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
	_, err = store.RecordAndActivate(ctx, in3)
	if !errors.Is(err, promoter.ErrIntegrity) || !strings.Contains(err.Error(), in.Targets[0].ArtifactDigest) {
		t.Fatalf("release 3 with an artifact under another media type: %v, want ErrIntegrity naming %s", err, in.Targets[0].ArtifactDigest)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM configpub.config_release WHERE env_tag = 'prod' AND release_version = 3`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("release 3 recorded %d times after the refusal (%v), want 0", n, err)
	}
}
