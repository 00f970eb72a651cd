package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// searchListed is how many targets one search page lists.
const searchListed = 50

// maxQueryLen bounds a search's text (a host and a service ID fit).
const maxQueryLen = 512

// TargetSearch is a target search's answer: the targets whose identity
// (host/serviceId) or service ID starts with Query, in EnvTag when it is
// set (every environment's otherwise), by environment, host and service,
// one page from offset From.
type TargetSearch struct {
	Query   string      `json:"query"`
	EnvTag  string      `json:"envTag,omitempty"`
	From    int         `json:"from,omitempty"`
	Targets []TargetHit `json:"targets"`
	Next    int         `json:"next,omitempty"` // offset of the next page; 0 = none
}

// TargetHit is one target a search found, with its current pointer.
type TargetHit struct {
	EnvTag          string     `json:"envTag"`
	Host            string     `json:"host"`
	ServiceID       string     `json:"serviceId"`
	Audience        string     `json:"audience"`
	Release         int64      `json:"releaseVersion"` // the pointer's release
	SnapshotRelease int64      `json:"snapshotReleaseVersion"`
	ArtifactDigest  string     `json:"artifactDigest"`
	LeaseExpiresAt  time.Time  `json:"leaseExpiresAt"`
	RetiredAt       *time.Time `json:"retiredAt,omitempty"`
}

// prefixEnd returns the least string above every string that starts with
// p in byte order (UTF-8's byte order is code point order): p with its
// last code point raised by one. "" when there is none (p is empty or
// only U+10FFFF).
func prefixEnd(p string) string {
	r := []rune(p)
	for len(r) > 0 {
		last := r[len(r)-1]
		r = r[:len(r)-1]
		if last < utf8.MaxRune {
			next := last + 1
			if next >= 0xD800 && next <= 0xDFFF { // surrogates are not text
				next = 0xE000
			}
			return string(append(r, next))
		}
	}
	return ""
}

// searchSQL is the one statement a search runs, with its arguments: the
// identity prefix range and the service ID prefix range are the two
// indexes of migration 28 (current_pointer_identity_prefix,
// current_pointer_service_prefix); an empty query lists the environment's
// targets (current_pointer_env) or every target in key order.
func (r *reader) searchSQL(query, env string, from int) (string, []any) {
	var where []string
	args := []any{searchListed + 1, from}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d::text", len(args))
	}
	if env != "" {
		where = append(where, "p.env_tag = "+arg(env))
	}
	if query != "" {
		q := arg(query)
		ident := "(p.host || '/' || p.service_id) ~>=~ " + q
		svc := "p.service_id ~>=~ " + q
		if end := prefixEnd(query); end != "" {
			e := arg(end)
			ident += " AND (p.host || '/' || p.service_id) ~<~ " + e
			svc += " AND p.service_id ~<~ " + e
		}
		where = append(where, "(("+ident+") OR ("+svc+"))")
	}
	cond := "true"
	if len(where) > 0 {
		cond = strings.Join(where, " AND ")
	}
	return `WITH hit AS (SELECT p.env_tag, p.host, p.service_id, p.snapshot_id, p.release_version, p.lease_expires_at,
			` + r.retiredAtCol("p") + ` AS retired_at
		FROM configpub.current_pointer p WHERE ` + cond + `
		ORDER BY p.env_tag, p.host, p.service_id LIMIT $1 OFFSET $2)
	SELECT hit.env_tag, hit.host, hit.service_id, s.audience, hit.release_version, s.release_version, s.artifact_digest,
		hit.lease_expires_at, hit.retired_at
	FROM hit JOIN configpub.config_snapshot s ON s.snapshot_id = hit.snapshot_id
	ORDER BY hit.env_tag, hit.host, hit.service_id`, args
}

// SearchTargets finds the targets whose identity (host/serviceId) or
// service ID starts with query, in env when it is set, at most
// searchListed of them from offset from on. An empty query lists env's
// targets (every target when env is empty too).
func (r *reader) SearchTargets(ctx context.Context, query, env string, from int) (*TargetSearch, error) {
	out := &TargetSearch{Query: query, EnvTag: env, From: from, Targets: []TargetHit{}}
	sql, args := r.searchSQL(query, env, from)
	rows, err := r.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("search targets %q: %w", query, err)
	}
	hits, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (TargetHit, error) {
		var h TargetHit
		err := row.Scan(&h.EnvTag, &h.Host, &h.ServiceID, &h.Audience, &h.Release, &h.SnapshotRelease, &h.ArtifactDigest,
			&h.LeaseExpiresAt, &h.RetiredAt)
		h.LeaseExpiresAt = h.LeaseExpiresAt.UTC()
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("search targets %q: %w", query, err)
	}
	if len(hits) > searchListed {
		hits = hits[:searchListed]
		out.Next = from + searchListed
	}
	if hits != nil {
		out.Targets = hits
	}
	if len(hits) == 0 && env != "" {
		// Nothing found in an environment: say so when it is none at all
		// (a typo in ?env=), as the overview and the timeline do.
		var known bool
		if err := r.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.environment WHERE env_tag = $1)`, env).Scan(&known); err != nil {
			return nil, fmt.Errorf("search targets in %s: %w", env, err)
		}
		if !known {
			return nil, fmt.Errorf("environment %s: %w", env, ErrNotFound)
		}
	}
	return out, nil
}

// search serves /targets and /api/targets: ?q= (a prefix of host/serviceId
// or of a service ID), ?env= and ?from=N.
func (c *Console) search(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	query, env := strings.TrimSpace(q.Get("q")), strings.TrimSpace(q.Get("env"))
	for name, v := range map[string]string{"q": query, "env": env} {
		if len(v) > maxQueryLen { // not UTF-8, or with a NUL: 400 from cleanPath
			return "", nil, badRequest("%s is not text of at most %d bytes", name, maxQueryLen)
		}
	}
	// Hosts, service IDs and environment tags are lowercase by their
	// grammar: a query typed in capitals means the same.
	query, env = strings.ToLower(query), strings.ToLower(env)
	from, err := optInt(r, "from")
	if err != nil {
		return "", nil, err
	}
	v, err := c.pc.get(fmt.Sprintf("search\x00%s\x00%s\x00%d", env, query, from), func() (any, error) {
		return c.rd.SearchTargets(r.Context(), query, env, int(min(from, 1<<30)))
	})
	return "search", v, err
}
