// Package pgsession opens configpub's PostgreSQL connections with the
// session settings its statements are written for.
//
// configpub's statements are short and index-driven, but over an environment
// of 100,000 targets the planner's cost estimates pass PostgreSQL's
// jit_above_cost, and compiling a statement to machine code then costs more
// than running it: at 100,000 targets `configpub status` spends half its
// time, and the console's overview more than half, in JIT compilation. So
// every configpub session turns JIT off, unless the connection URL sets jit
// itself (?jit=on, or options=-c jit=on), which an operator who measured
// otherwise may do.
//
// A password read from a passfile (PGPASSFILE, the URL's passfile, or
// ~/.pgpass: none in the URL or PGPASSWORD) is read from it again for every
// new connection, so a long-running process — the Config Server, a
// `lease renew --interval` — follows a password rotated in the file (a
// Kubernetes Secret updated in place) instead of failing to log in once
// its connections are recycled.
package pgsession

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgpassfile"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults are the session settings configpub sends with every connection
// unless its URL sets them.
var defaults = map[string]string{"jit": "off"}

// Apply adds the session defaults to cfg's runtime parameters, keeping any
// the URL set (as a parameter of its own or inside options).
func Apply(cfg *pgx.ConnConfig) {
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	for name, value := range defaults {
		if _, ok := cfg.RuntimeParams[name]; ok || setInOptions(cfg.RuntimeParams["options"], name) {
			continue
		}
		cfg.RuntimeParams[name] = value
	}
}

// setInOptions reports whether a libpq options string ("-c jit=on",
// "--jit=on") sets name.
func setInOptions(options, name string) bool {
	fields := strings.Fields(options)
	for i, f := range fields {
		switch {
		case f == "-c" && i+1 < len(fields):
			f = fields[i+1]
		case strings.HasPrefix(f, "-c"):
			f = f[2:]
		case strings.HasPrefix(f, "--"):
			f = f[2:]
		default:
			continue
		}
		if k, _, ok := strings.Cut(f, "="); ok && strings.EqualFold(strings.ReplaceAll(k, "-", "_"), name) {
			return true
		}
	}
	return false
}

// ParsePool parses a connection URL into a pool configuration with the
// session defaults applied. When the password comes from a passfile, the
// configuration's BeforeConnect reads it again for every new connection
// (see the package documentation); a dial outside the pool calls it too.
func ParsePool(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, HideConnString(err)
	}
	Apply(cfg.ConnConfig)
	if path := passfileOf(url); path != "" {
		var last atomic.Pointer[string] // the password read last
		cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
			if pw, ok := passwordFrom(path, cc); ok {
				last.Store(&pw)
			}
			if pw := last.Load(); pw != nil {
				cc.Password = *pw
			}
			return nil
		}
	}
	return cfg, nil
}

// passfileOf returns the passfile a connection to connString takes its
// password from, as libpq and pgconn find it, or "" when the password is
// given otherwise (in connString or PGPASSWORD).
func passfileOf(connString string) string {
	if os.Getenv("PGPASSWORD") != "" {
		return ""
	}
	settings := map[string]string{}
	if u, err := neturl.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, ok := u.User.Password(); ok {
			return ""
		}
		for k, v := range u.Query() {
			settings[k] = v[len(v)-1]
		}
	} else {
		for _, f := range strings.Fields(connString) {
			if k, v, ok := strings.Cut(f, "="); ok {
				settings[strings.TrimSpace(k)] = strings.Trim(v, "'")
			}
		}
	}
	if _, ok := settings["password"]; ok {
		return ""
	}
	if p := settings["passfile"]; p != "" {
		return p
	}
	if p := os.Getenv("PGPASSFILE"); p != "" {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".pgpass")
	}
	return ""
}

// passwordFrom reads the password for cc from the passfile at path; a file
// that cannot be read, or has no entry for cc, gives none.
func passwordFrom(path string, cc *pgx.ConnConfig) (string, bool) {
	pf, err := pgpassfile.ReadPassfile(path)
	if err != nil {
		return "", false
	}
	host := cc.Host
	if network, _ := pgconn.NetworkAddress(cc.Host, cc.Port); network == "unix" {
		host = "localhost"
	}
	pw := pf.FindPassword(host, strconv.Itoa(int(cc.Port)), cc.Database, cc.User)
	return pw, pw != ""
}

// connStringError is a connection string that did not parse, told without
// the string.
type connStringError struct {
	reason string
	err    error
}

func (e *connStringError) Error() string {
	return "cannot parse the connection string (not repeated: it may hold a password): " + e.reason
}

func (e *connStringError) Unwrap() error { return e.err }

// HideConnString returns err without the connection string when it is a
// *pgconn.ParseConfigError, whose text repeats the string with passwords
// masked only where pgx recognises them: a keyword/value string that
// spaces its '=' ("password = s3cret") or is malformed as a whole is
// repeated as given. The reason (invalid port, sslmode is invalid, ...) is
// kept. Any other error is returned as it is.
func HideConnString(err error) error {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return err
	}
	// pgx writes "cannot parse `STRING`: REASON"; its reasons hold no
	// backquote followed by ": ", so the last one ends the string.
	s := pe.Error()
	reason := "invalid connection string"
	if i := strings.LastIndex(s, "`: "); i >= 0 {
		reason = s[i+len("`: "):]
	}
	return &connStringError{reason: reason, err: pe.Unwrap()}
}

// NewPool opens a pool for url with the session defaults applied.
func NewPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := ParsePool(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	return pool, nil
}
