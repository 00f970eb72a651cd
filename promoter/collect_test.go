package promoter_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/sqlstate"
	"github.com/configpub/configpub/promoter"
)

// storedArtifacts is what a store-ahead promotion hands to StoreArtifacts.
func storedArtifacts(in promoter.ReleaseInput) []promoter.Artifact {
	out := make([]promoter.Artifact, len(in.Targets))
	for i, tg := range in.Targets {
		out[i] = promoter.Artifact{Digest: tg.ArtifactDigest, MediaType: tg.MediaType, Bytes: tg.Values}
	}
	return out
}

// headless is in recorded by reference to artifacts stored ahead.
func headless(in promoter.ReleaseInput) promoter.ReleaseInput {
	out := in
	out.Targets = append([]promoter.Target(nil), in.Targets...)
	for i := range out.Targets {
		out.Targets[i].Values = nil
	}
	out.ArtifactsStored = true
	return out
}

// collector opens a store on f's database as the promoter role, whose
// clock is the real time (the database stamps each artifact with its own
// now()) moved on as later says, and returns it with its pool.
func (f *fixture) collector(t *testing.T, later func() time.Duration) (*promoter.Store, *pgxpool.Pool) {
	t.Helper()
	pool := f.db.PoolURL(t, f.db.URLFor(t, "configpub_promoter"))
	s, err := promoter.Open(context.Background(), pool, promoter.Options{Clock: func() time.Time { return time.Now().Add(later()) }})
	if err != nil {
		t.Fatal(err)
	}
	return s, pool
}

// storedAhead is release 1 of prod with n targets, its artifacts stored
// ahead and nothing recorded.
func (f *fixture) storedAhead(t *testing.T, n int) promoter.ReleaseInput {
	t.Helper()
	in := release("prod", 1, 0, n, nil, nil)
	if err := f.store.StoreArtifacts(context.Background(), storedArtifacts(in)); err != nil {
		t.Fatal(err)
	}
	return in
}

// aMonthOn is a collector clock's offset of 30 days.
func aMonthOn() time.Duration { return 30 * 24 * time.Hour }

// TestCollectArtifactsOverMonths: the artifacts of a promotion that stored
// them ahead and never recorded are kept while they are young and removed
// once older than the minimum age, in bounded statements, each one
// recorded; the artifacts any release references, current or not, are
// never removed over simulated months; a release whose artifacts were
// collected records again once they are stored again. The collector works
// with the promoter role's privileges, and nothing else may delete an
// artifact.
func TestCollectArtifactsOverMonths(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	// The collector's clock moves on by a simulated offset.
	var mu sync.Mutex
	offset := time.Duration(0)
	later := func(d time.Duration) { mu.Lock(); offset = d; mu.Unlock() }
	collector, collectorPool := f.collector(t, func() time.Duration { mu.Lock(); defer mu.Unlock(); return offset })
	collect := func(opts promoter.CollectOptions) promoter.Collection {
		t.Helper()
		c, err := collector.CollectArtifacts(ctx, opts)
		if err != nil {
			t.Fatalf("collect %+v: %v", opts, err)
		}
		return c
	}
	artifacts := func() map[string]bool {
		t.Helper()
		rows, err := f.pool.Query(ctx, "SELECT artifact_digest FROM configpub.artifact")
		if err != nil {
			t.Fatal(err)
		}
		ds, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, d := range ds {
			out[d] = true
		}
		return out
	}
	digests := func(in promoter.ReleaseInput) []string {
		out := make([]string, len(in.Targets))
		for i, tg := range in.Targets {
			out[i] = tg.ArtifactDigest
		}
		sort.Strings(out)
		return out
	}

	// Release 1 is recorded and active; release 2's artifacts are stored
	// ahead and its recording never happens.
	in1 := release("prod", 1, 0, 6, nil, nil)
	f.promote(t, in1)
	in2 := release("prod", 2, 1, 6, nil, nil)
	if err := f.store.StoreArtifacts(ctx, storedArtifacts(in2)); err != nil {
		t.Fatal(err)
	}
	var size2 int64
	for _, tg := range in2.Targets {
		size2 += int64(len(tg.Values))
	}
	if n := len(artifacts()); n != 12 {
		t.Fatalf("%d artifacts stored, want 12", n)
	}

	// Young: kept, at once and a day less a minute later.
	for _, d := range []time.Duration{0, 24*time.Hour - time.Minute} {
		later(d)
		if c := collect(promoter.CollectOptions{}); c.Artifacts != 0 || c.Bytes != 0 {
			t.Fatalf("%s after storing: collected %+v, want nothing (younger than a day)", d, c)
		}
	}
	if n := len(artifacts()); n != 12 {
		t.Fatalf("%d artifacts after collecting young ones, want 12", n)
	}

	// Three months on: a dry run counts release 2's six, removes nothing.
	later(90 * 24 * time.Hour)
	dry := collect(promoter.CollectOptions{DryRun: true})
	if dry.Artifacts != 6 || dry.Bytes != size2 || dry.Oldest.IsZero() || dry.Newest.Before(dry.Oldest) {
		t.Fatalf("dry run: %+v, want 6 artifacts of %d bytes", dry, size2)
	}
	if n := len(artifacts()); n != 12 {
		t.Fatalf("%d artifacts after a dry run, want 12", n)
	}
	// Removed in statements of at most 4.
	c := collect(promoter.CollectOptions{Batch: 4})
	if c.Artifacts != 6 || c.Bytes != size2 || !c.Oldest.Equal(dry.Oldest) || !c.Newest.Equal(dry.Newest) {
		t.Fatalf("collected %+v, want the dry run's %+v", c, dry)
	}
	left := artifacts()
	for _, d := range digests(in1) {
		if !left[d] {
			t.Errorf("release 1's artifact %s was collected", d)
		}
	}
	for _, d := range digests(in2) {
		if left[d] {
			t.Errorf("release 2's unreferenced artifact %s was kept", d)
		}
	}
	f.wantPointersAt(t, in1)
	// Each removal is on record.
	rows, err := f.pool.Query(ctx, "SELECT artifact_digest FROM configpub.collected_artifact WHERE collected_by <> '' ORDER BY artifact_digest")
	if err != nil {
		t.Fatal(err)
	}
	logged, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(logged, ",") != strings.Join(digests(in2), ",") {
		t.Errorf("collected_artifact lists %v, want release 2's %v", logged, digests(in2))
	}
	if again := collect(promoter.CollectOptions{}); again.Artifacts != 0 {
		t.Errorf("a second collection removed %+v, want nothing", again)
	}

	// Release 2 records only once its artifacts are stored again.
	if _, err := f.store.RecordAndActivate(ctx, headless(in2)); !errors.Is(err, promoter.ErrConflict) || !strings.Contains(err.Error(), "deleted by configpub db gc") {
		t.Fatalf("recording release 2 after its artifacts were collected: %v, want ErrConflict: deleted by configpub db gc", err)
	}
	if err := f.store.StoreArtifacts(ctx, storedArtifacts(in2)); err != nil {
		t.Fatal(err)
	}
	f.promote(t, headless(in2))
	f.wantPointersAt(t, in2)

	// Six months on, release 1 is history (a rollback target) and 2 is
	// current: both keep every artifact.
	later(180 * 24 * time.Hour)
	if c := collect(promoter.CollectOptions{MinAge: time.Hour}); c.Artifacts != 0 {
		t.Fatalf("collected %+v with releases 1 and 2 recorded, want nothing", c)
	}
	if n := len(artifacts()); n != 12 {
		t.Fatalf("%d artifacts after the last collection, want 12", n)
	}

	if _, err := collector.CollectArtifacts(ctx, promoter.CollectOptions{MinAge: -time.Hour}); !errors.Is(err, promoter.ErrInvalid) {
		t.Errorf("negative minimum age: %v, want ErrInvalid", err)
	}
	// Nothing but the collector deletes an artifact: the owner meets the
	// append-only trigger, the promoter and server roles the privileges.
	d := in1.Targets[0].ArtifactDigest
	for _, tc := range []struct {
		who  string
		exec func() error
		want string
	}{
		{"owner", func() error {
			_, err := f.pool.Exec(ctx, "DELETE FROM configpub.artifact WHERE artifact_digest = $1", d)
			return err
		}, sqlstate.AppendOnly},
		{"owner, with the collector's setting", func() error {
			// The trigger lets it through; the foreign key does not.
			tx, err := f.pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SET LOCAL configpub.collecting_artifacts = 'on'"); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "DELETE FROM configpub.artifact WHERE artifact_digest = $1", d)
			return err
		}, sqlstate.ForeignKeyViolation},
		{"configpub_promoter", func() error {
			_, err := collectorPool.Exec(ctx, "DELETE FROM configpub.artifact WHERE artifact_digest = $1", d)
			return err
		}, sqlstate.InsufficientPrivilege},
		{"configpub_server", func() error {
			_, err := f.db.PoolURL(t, f.db.URLFor(t, "configpub_server")).Exec(ctx, "SELECT * FROM configpub.collect_artifacts(now(), 10)")
			return err
		}, sqlstate.InsufficientPrivilege},
	} {
		if got := sqlStateOf(tc.exec()); got != tc.want {
			t.Errorf("%s deleting an artifact: SQLSTATE %q, want %s", tc.who, got, tc.want)
		}
	}
	if !artifacts()[d] {
		t.Fatalf("artifact %s was deleted", d)
	}
}

// TestCollectArtifactsSkipsAReleaseBeingRecorded: a collection that runs
// while a release stored ahead is being recorded (its snapshots written,
// not yet committed) neither removes that release's artifacts nor waits for
// the recording; once it commits, they are referenced and kept.
func TestCollectArtifactsSkipsAReleaseBeingRecorded(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	collector, _ := f.collector(t, aMonthOn)
	in := f.storedAhead(t, 5)
	var during []promoter.Collection
	recorder := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(ctx context.Context, step string, tx pgx.Tx) error {
			if step != "commit" {
				return nil
			}
			var snapshots int
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM configpub.config_snapshot").Scan(&snapshots); err != nil || snapshots == 0 {
				return err // not the recording's transaction
			}
			wait, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			c, err := collector.CollectArtifacts(wait, promoter.CollectOptions{})
			if err != nil {
				t.Errorf("collecting while the release records: %v", err)
			}
			during = append(during, c)
			return nil
		})
	})
	if _, err := recorder.RecordAndActivate(ctx, headless(in)); err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 {
		t.Fatal("the collection never ran inside the recording")
	}
	for _, c := range during {
		if c.Artifacts != 0 {
			t.Errorf("collected %+v while the release that references them recorded, want nothing", c)
		}
	}
	if c, err := collector.CollectArtifacts(ctx, promoter.CollectOptions{}); err != nil || c.Artifacts != 0 {
		t.Fatalf("collecting after the recording: %+v, %v; want nothing", c, err)
	}
	f.wantPointersAt(t, in)
}

// sqlStateOf is the SQLSTATE of err, "" when it is not a server error.
func sqlStateOf(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// TestRecordingWhoseArtifactsWereCollectedInBetween: a collection that runs
// after a recording checked its stored artifacts and before it writes the
// snapshots (a --min-age shorter than the promotion) makes the recording
// fail with ErrConflict saying so, with nothing recorded; the next
// attempt stores the artifacts again and records.
func TestRecordingWhoseArtifactsWereCollectedInBetween(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	collector, _ := f.collector(t, aMonthOn)
	in := f.storedAhead(t, 5)
	collected := 0
	recorder := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(ctx context.Context, step string, _ pgx.Tx) error {
			if step != "record:artifacts" || collected > 0 {
				return nil
			}
			c, err := collector.CollectArtifacts(ctx, promoter.CollectOptions{})
			collected = c.Artifacts
			return err
		})
	})
	_, err := recorder.RecordAndActivate(ctx, headless(in))
	if collected != 5 {
		t.Fatalf("the collection inside the recording removed %d artifacts, want 5", collected)
	}
	if !errors.Is(err, promoter.ErrConflict) || !strings.Contains(err.Error(), "deleted while it recorded") {
		t.Fatalf("recording after its artifacts were collected: %v, want ErrConflict saying an artifact was deleted while it recorded", err)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.config_release"); n != 0 {
		t.Fatalf("%d releases recorded, want none", n)
	}
	if err := f.store.StoreArtifacts(ctx, storedArtifacts(in)); err != nil {
		t.Fatal(err)
	}
	if _, err := recorder.RecordAndActivate(ctx, headless(in)); err != nil {
		t.Fatalf("the next attempt: %v", err)
	}
	f.wantPointersAt(t, in)
}
