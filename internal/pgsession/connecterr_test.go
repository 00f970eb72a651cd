package pgsession_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgsession"
)

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// TestConnectErrorInOneLine: a pool's failed connection to two hosts (a
// primary and its fallback, each tried with and without TLS) is told in
// one line naming both, the database and the user, with the reason once,
// and without the password; an error that is not a connection's is told
// as it is.
func TestConnectErrorInOneLine(t *testing.T) {
	p1, p2 := closedPort(t), closedPort(t)
	pool, err := pgsession.NewPool(context.Background(),
		"host=127.0.0.1,127.0.0.1 port="+p1+","+p2+" user=bob password=s3cr3t dbname=app connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = pool.Ping(ctx)
	if err == nil {
		t.Fatal("ping: connected to a closed port")
	}
	want := "cannot connect to PostgreSQL at 127.0.0.1:" + p1 + ", 127.0.0.1:" + p2 + " (database app, user bob): connection refused"
	if got := pgsession.ErrorText(err); got != want || strings.Contains(got, "s3cr3t") {
		t.Errorf("got %q\nwant %q\n(pgx: %q)", got, want, err)
	}
	other := context.DeadlineExceeded
	if got := pgsession.ErrorText(other); got != other.Error() {
		t.Errorf("another error: got %q, want %q", got, other)
	}
}
