package main

import (
	"strings"
	"testing"
)

// TestDatabaseURLPasswordNotEchoed: a --database (or CONFIGPUB_DATABASE_URL)
// that does not parse is refused naming the flag and the reason, and never
// with the password in it — also where pgx's own masking misses it: a
// keyword/value string that spaces its '=', as libpq allows, or one
// malformed as a whole.
func TestDatabaseURLPasswordNotEchoed(t *testing.T) {
	for _, tc := range []struct{ dsn, reason string }{
		{"host=db.internal password = s3cr3t port=x", "invalid port"},
		{"host=db.internal password =s3cr3t sslmode=bogus", "sslmode is invalid"},
		{"garbage s3cr3t", "invalid keyword/value"},
		{"postgres://u:s3cr3t@db.internal:99999/db", "invalid port"},
	} {
		for _, args := range [][]string{
			{"status", "--env", "dev", "--database", tc.dsn},
			{"db", "migrate", "--database", tc.dsn},
		} {
			t.Run(args[0]+" "+tc.dsn, func(t *testing.T) {
				out, err := runCLI(args...)
				if err == nil {
					t.Fatalf("%v: no error (%s)", args, out)
				}
				if msg := err.Error() + out; strings.Contains(msg, "s3cr3t") {
					t.Errorf("%v: the password is echoed: %q", args, msg)
				}
				if !strings.Contains(err.Error(), "--database") || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("%v: got %q, want it to name --database and %q", args, err, tc.reason)
				}
			})
		}
	}
}
