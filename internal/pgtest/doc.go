// Package pgtest gives tests real PostgreSQL databases.
//
// A private throwaway cluster (internal/pgcluster) is started once per test
// binary with the installed initdb/pg_ctl (from PATH or
// /usr/lib/postgresql/*/bin) in a fresh temporary directory, listening
// on 127.0.0.1 at a free port with its unix socket in the cluster's temporary
// directory, fsync off. When the test binary runs as root the cluster runs as
// the `postgres` OS user. Each New call creates a fresh database, applies
// dbschema.Migrate and drops it in t.Cleanup, so tests may run in parallel.
//
// Setting CONFIGPUB_TEST_DATABASE_URL (a URL of a role that may create
// databases and roles) uses that server instead of a private cluster.
//
// Use Main from TestMain so the cluster is stopped and removed when the test
// binary ends:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// A watchdog process also stops and removes the cluster if the test binary
// dies without running Main (a crash, a kill -9, a test timeout).
//
// The cluster is the one piece of package-level state: it is started at most
// once per process behind a sync.Once and never changes after that.
package pgtest
