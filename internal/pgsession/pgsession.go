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
package pgsession

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
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
// session defaults applied.
func ParsePool(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	Apply(cfg.ConnConfig)
	return cfg, nil
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
