package pgcluster

import "errors"

// ErrNoBinaries is returned when initdb/pg_ctl cannot be found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; install them (Debian: apt-get install postgresql)")
