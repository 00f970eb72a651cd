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
