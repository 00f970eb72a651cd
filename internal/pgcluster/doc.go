// Package pgcluster runs a private PostgreSQL cluster from the installed
// server binaries (initdb, pg_ctl): the embedded default database of
// `configpub demo` and the private cluster of the test harness
// internal/pgtest.
//
// New prepares a cluster directory (running initdb once), Start starts the
// server on 127.0.0.1 at a given or free port with its unix socket in the
// directory, Stop stops it. The superuser is "postgres" with trust
// authentication, so a cluster must only ever listen on loopback. When the
// process runs as root the directory is chowned to, and every server binary
// runs as, the unprivileged `postgres` OS user, as PostgreSQL requires;
// Command gives callers the same treatment for commands of their own.
package pgcluster
