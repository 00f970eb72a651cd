package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/pgtest"
)

// TestDatabaseConnectErrorIsOneLine: the built binary, failing to connect
// to PostgreSQL — a refused connection, and a wrong password against a real
// cluster that requires one — prints one line naming the host and port,
// the database and the user and why, never the password, and exits 1. pgx's
// text spanned three lines: its summary, then each attempt (with TLS, then
// without) on a line of its own.
func TestDatabaseConnectErrorIsOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a PostgreSQL cluster")
	}
	bin := buildCLI(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused

	c, super := pgtest.PasswordCluster(t, "configpub_login")
	if _, err := super.Exec(context.Background(), "CREATE ROLE alice LOGIN PASSWORD 'right-one' IN ROLE configpub_login"); err != nil {
		t.Fatal(err)
	}
	cluster := "127.0.0.1:" + strconv.Itoa(c.Port)

	for _, tc := range []struct {
		name, url, want string
	}{
		{"refused", "postgres://alice:s3cr3t@" + closed + "/configpub",
			"cannot connect to PostgreSQL at " + closed + " (database configpub, user alice): connection refused"},
		{"wrong password", "postgres://alice:s3cr3t@" + cluster + "/postgres",
			"cannot connect to PostgreSQL at " + cluster + ` (database postgres, user alice): password authentication failed for user "alice" (SQLSTATE 28P01)`},
	} {
		for _, args := range [][]string{
			{"status", "--env", "dev", "--database", tc.url},
			{"db", "migrate", "--database", tc.url},
		} {
			t.Run(tc.name+" "+args[0], func(t *testing.T) {
				cmd := exec.Command(bin, args...)
				cmd.Env = append(os.Environ(), "PGPASSWORD=", "PGPASSFILE=/nonexistent", "CONFIGPUB_DATABASE_URL=")
				var stderr strings.Builder
				cmd.Stderr = &stderr
				err := cmd.Run()
				if code := cmd.ProcessState.ExitCode(); code != exitRefused {
					t.Errorf("exit %d (%v), want 1", code, err)
				}
				got := stderr.String()
				if strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "configpub: ") || !strings.HasSuffix(got, tc.want+"\n") {
					t.Errorf("stderr:\n%s\nwant one line ending %q", got, tc.want)
				}
				if strings.Contains(got, "s3cr3t") {
					t.Errorf("the password is printed: %s", got)
				}
			})
		}
	}
}
