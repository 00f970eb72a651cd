package pgtest_test

import (
	"context"
	"testing"

	"github.com/configpub/configpub/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestNewMigratesAFreshDatabase(t *testing.T) {
	for i := 0; i < 4; i++ {
		t.Run("parallel", func(t *testing.T) {
			t.Parallel()
			db := pgtest.New(t)
			pool := db.Pool(t)
			var n int
			if err := pool.QueryRow(context.Background(),
				"SELECT count(*) FROM configpub.schema_migration").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n < 1 {
				t.Fatalf("got %d applied migrations, want at least 1", n)
			}
			var tables int
			if err := pool.QueryRow(context.Background(),
				"SELECT count(*) FROM pg_tables WHERE schemaname = 'configpub'").Scan(&tables); err != nil {
				t.Fatal(err)
			}
			if tables == 0 {
				t.Fatal("got no tables in schema configpub")
			}
		})
	}
}

func TestURLForConnectsAsAMemberOfTheRole(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.PoolURL(t, db.URLFor(t, "configpub_server"))
	var member bool
	if err := pool.QueryRow(context.Background(),
		"SELECT pg_has_role(current_user, 'configpub_server', 'USAGE')").Scan(&member); err != nil {
		t.Fatal(err)
	}
	if !member {
		t.Fatal("got a user that is not a member of configpub_server")
	}
}

func TestReplicaURLForReadsAHotStandby(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	owner := db.Pool(t)
	replica := db.PoolURL(t, db.ReplicaURLFor(t, "configpub_server"))
	var recovering bool
	if err := replica.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
		t.Fatalf("pg_is_in_recovery on the replica URL = %v (%v), want true", recovering, err)
	}
	var pointers int
	if err := replica.QueryRow(ctx, "SELECT count(*) FROM configpub.current_pointer").Scan(&pointers); err != nil {
		t.Fatalf("the server role reads the replicated schema: %v", err)
	}
	// A row written on the primary after the replica URL was handed out
	// arrives by replay.
	if _, err := owner.Exec(ctx, `CREATE TABLE probe (v int); INSERT INTO probe VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	db.WaitReplayed(t)
	ownerReplica := db.PoolURL(t, db.ReplicaURL(t))
	var n int
	if err := ownerReplica.QueryRow(ctx, "SELECT count(*) FROM probe").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows on the replica after replay: %d (%v), want 1", n, err)
	}
	if _, err := ownerReplica.Exec(ctx, "DELETE FROM probe"); err == nil {
		t.Fatal("the replica accepted a write")
	}
}
