package pgsession

import (
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrorText is err's text with the text of a *pgconn.ConnectError in its
// chain — pgx writes one line per connection attempt, each host tried
// with and without TLS — told in one line naming where it connected and
// why each attempt failed:
//
//	cannot connect to PostgreSQL at 127.0.0.1:5432 (database configpub, user alice): connection refused
//
// A password is never in it (pgx's text holds none either). Any other
// error's text is returned as it is.
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) || ce.Config == nil {
		return msg
	}
	return strings.Replace(msg, ce.Error(), connectLine(ce), 1)
}

// connectLine is ce told in one line.
func connectLine(ce *pgconn.ConnectError) string {
	// Per address, the last attempt's reason: under sslmode=prefer the
	// attempt with TLS that a server without it refuses is followed by
	// one without, which says why the connection failed.
	var addrs []string
	last := map[string]string{}
	for _, a := range attempts(ce.Unwrap()) {
		addr, _, _ := strings.Cut(a.Error(), " (") // pgx's "ADDRESS (HOST): …"
		if _, ok := last[addr]; !ok {
			addrs = append(addrs, addr)
		}
		last[addr] = attemptReason(a)
	}
	var reasons []string
	for _, a := range addrs {
		if !slices.Contains(reasons, last[a]) {
			reasons = append(reasons, last[a])
		}
	}
	return "cannot connect to PostgreSQL at " + strings.Join(addresses(ce.Config), ", ") +
		" (database " + ce.Config.Database + ", user " + ce.Config.User + "): " + strings.Join(reasons, "; ")
}

// addresses are the hosts cfg tries, each once (a host is tried with and
// without TLS under sslmode=prefer).
func addresses(cfg *pgconn.Config) []string {
	var out []string
	add := func(host string, port uint16) {
		a := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if strings.HasPrefix(host, "/") {
			a = host + "/.s.PGSQL." + strconv.Itoa(int(port)) // a unix socket
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return out
}

// attempts flattens the errors.Join of pgx's attempts.
func attempts(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, attempts(e)...)
		}
		return out
	}
	return []error{err}
}

// attemptReason is why one attempt failed: the server's error with its
// SQLSTATE, the network's (connection refused, no such host, i/o
// timeout), or pgx's text of it without the address it repeats, in one
// line.
func attemptReason(err error) string {
	var pe *pgconn.PgError
	var dns *net.DNSError
	var sys *os.SyscallError
	var op *net.OpError
	switch {
	case errors.As(err, &pe):
		return pe.Message + " (SQLSTATE " + pe.Code + ")"
	case errors.As(err, &dns):
		return "lookup " + dns.Name + ": " + dns.Err
	case errors.As(err, &sys):
		return sys.Err.Error() // "connection refused", not "connect: connection refused"
	case errors.As(err, &op) && op.Err != nil:
		return op.Err.Error()
	}
	msg := err.Error()
	if inner := errors.Unwrap(err); inner != nil {
		msg = inner.Error() // a per-attempt error's text without its "ADDRESS (HOST): "
	}
	return strings.Join(strings.Fields(msg), " ")
}
