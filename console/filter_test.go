package console

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/pgtest"
)

// TestReleaseDiffFiltersAndPagesBack: a release's changed targets can be
// restricted to one audience and one host (counts too), and paged back as
// well as forward, the links keeping the filters and the diff's base.
func TestReleaseDiffFiltersAndPagesBack(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// Release 2 changes svc-0..119: h0.example has 100 of them, h1.example
	// 20; every third (i % 3 == 0) is an Agent.
	generate(t, db.Pool(t), generated{env: "dev", targets: 250, releases: 2, changed: 120})
	now := releaseAt(2).Add(time.Hour)
	c, _ := newTestConsole(t, viewerPool(t, db, false), Options{Now: func() time.Time { return now }})
	h := c.Handler()
	api := func(query string) ReleaseDetail {
		t.Helper()
		return localJSON[ReleaseDetail](t, h, "/api/environments/dev/releases/2"+query)
	}
	for _, c := range []struct {
		query      string
		total, len int
	}{
		{"", 120, changedListed},
		{"?host=h1.example", 20, 20},
		{"?audience=agent", 40, 40},
		{"?audience=agent&host=h1.example", 6, 6},
		{"?audience=agent&host=h1.example&against=current", 0, 0},
		{"?host=nosuch", 0, 0},
		// The host filter is a prefix: h1.example's 20 by the start of
		// its name, both hosts by "h", in capitals too.
		{"?host=h1", 20, 20},
		{"?host=h1.ex", 20, 20},
		{"?host=h", 120, changedListed},
		{"?host=H0.EXAMPLE", 100, changedListed},
		{"?audience=agent&host=h1", 6, 6},
		// The audience too, lowercase by its grammar like the host.
		{"?audience=Agent", 40, 40},
		{"?audience=AGENT&host=H1", 6, 6},
		{"?host=h1.example%2F", 0, 0},
	} {
		d := api(c.query)
		if d.ChangedTotal != c.total || len(d.Changed) != c.len {
			t.Errorf("%s: %d changed, %d listed; want %d, %d", c.query, d.ChangedTotal, len(d.Changed), c.total, c.len)
		}
		for _, td := range d.Changed {
			if (d.FilterHost != "" && !strings.HasPrefix(td.Host, d.FilterHost)) || (d.FilterAudience != "" && td.Audience != d.FilterAudience) {
				t.Errorf("%s lists %s/%s (%s)", c.query, td.Host, td.ServiceID, td.Audience)
			}
		}
	}
	// Back and forth over h0.example's 100 changed targets.
	if d := api("?host=h0.example"); d.ChangedPrev != nil || d.ChangedNext != changedListed {
		t.Errorf("first page: prev %v, next %d; want none, %d", d.ChangedPrev, d.ChangedNext, changedListed)
	}
	if d := api("?host=h0.example&from=70"); d.ChangedPrev == nil || *d.ChangedPrev != 70-changedListed || d.ChangedNext != 0 || len(d.Changed) != 30 {
		t.Errorf("from 70: prev %v, next %d, %d listed; want %d, none, 30", d.ChangedPrev, d.ChangedNext, len(d.Changed), 70-changedListed)
	}
	if d := api("?host=h0.example&from=50"); d.ChangedPrev == nil || *d.ChangedPrev != 0 {
		t.Errorf("from 50: prev %v, want 0", d.ChangedPrev)
	}
	page := localGet(h, "/env/dev/releases/2?host=h0.example&from=50").Body.String()
	mustContain(t, "filtered second page", page, `id="changed-prev"`, `href="/env/dev/releases/2?against=base&amp;host=h0.example"`,
		"100 target(s) changed on hosts starting h0.example", `value="h0.example"`, `id="clear-filter"`)
	page = localGet(h, "/env/dev/releases/2?audience=gateway").Body.String()
	mustContain(t, "filtered by audience", page, `<option value="gateway" selected>`, "40 target(s) changed for Gateway")
	page = localGet(h, "/env/dev/releases/2?audience=GATEWAY").Body.String()
	mustContain(t, "filtered by audience in capitals", page, `<option value="gateway" selected>`, "40 target(s) changed for Gateway")
	if strings.Contains(page, `id="changed-prev"`) || strings.Contains(page, `id="changed-next"`) {
		t.Errorf("one page of 40 links other pages")
	}
	if rec := localGet(h, "/api/environments/dev/releases/2?host=%ff"); rec.Code != 400 || !strings.Contains(rec.Body.String(), "host") {
		t.Errorf("host=%%ff: %d %s, want 400 naming host", rec.Code, rec.Body)
	}
}

// TestReleaseDiffHostPrefixReadsOneRelease: a release diff filtered to the
// hosts starting with a prefix (against the base or the current release,
// with and without an audience) reads the release's part of the existing
// indexes — config_snapshot_release_audience and config_release_target's
// primary key, by environment and release — with a generic plan, and
// checks the prefix byte-wise there: no statement scans a whole table.
func TestReleaseDiffHostPrefixReadsOneRelease(t *testing.T) {
	oneRelease := regexp.MustCompile(`(config_snapshot_release\w*|config_release_target_pkey)[^\n]*\n\s+Index Cond: \(\(env_tag = \$1\) AND \(release_version = \$[23]\)`)
	t.Parallel()
	db := pgtest.New(t)
	owner := db.Pool(t)
	generate(t, owner, generated{env: "dev", targets: 2000, releases: 3, changed: 300})
	ctx := context.Background()
	if _, err := owner.Exec(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []ReleaseDetail{
		{Release: Release{EnvTag: "dev", Version: 3}, Against: AgainstBase, AgainstRelease: 2, FilterHost: "h1"},
		{Release: Release{EnvTag: "dev", Version: 3}, Against: AgainstBase, AgainstRelease: 2, FilterHost: "h1", FilterAudience: "agent"},
		{Release: Release{EnvTag: "dev", Version: 1}, Against: AgainstCurrent, AgainstRelease: 3, FilterHost: "h1"},
		{Release: Release{EnvTag: "dev", Version: 1}, Against: AgainstCurrent, AgainstRelease: 3, FilterHost: "h1", FilterAudience: "agent"},
	} {
		st := diffStatements(&d)
		name := fmt.Sprintf("against %s, audience %q, host %q", d.Against, d.FilterAudience, d.FilterHost)
		for _, q := range []struct {
			what, sql string
			args      []any
		}{
			{"count", st.count, st.args},
			{"list", st.list, append(append([]any(nil), st.args...), changedListed, 0)},
			{"retired", st.retired, append(append([]any(nil), st.args...), changedListed)},
		} {
			p := genericPlan(t, owner, q.sql, q.args)
			if !strings.Contains(p, "~>=~") || !strings.Contains(p, "~<~") {
				t.Errorf("%s, %s: the host prefix is not in the plan:\n%s", name, q.what, p)
			}
			if strings.Contains(p, "Seq Scan") {
				t.Errorf("%s, %s: a table is scanned whole:\n%s", name, q.what, p)
			}
			// The filtered rows are read by an index of the release's
			// snapshots or mapping, by environment and release.
			if !oneRelease.MatchString(p) {
				t.Errorf("%s, %s: no index scan by environment and release:\n%s", name, q.what, p)
			}
		}
	}
}

// genericPlan is EXPLAIN of sql with args under a generic plan (the
// parameters bound at any time) and sequential scans disabled, so that a
// statement no index can serve still shows a Seq Scan.
func genericPlan(t *testing.T, pool *pgxpool.Pool, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range []string{"DEALLOCATE ALL", "SET LOCAL plan_cache_mode = force_generic_plan", "SET LOCAL enable_seqscan = off", "SET LOCAL enable_hashjoin = off", "SET LOCAL enable_mergejoin = off", "PREPARE s AS " + sql} {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = fmt.Sprintf("'%v'", a)
	}
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE s("+strings.Join(lits, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n") + "\n"
}

// planNode is the subtree of an EXPLAIN text plan whose node has a line
// containing detail (the node's line and every line below it that is
// indented further), or "" if no node has it.
func planNode(plan, detail string) string {
	lines := strings.Split(plan, "\n")
	// depth is the indentation of a node line: its "->" or, for the top
	// node, 0; -1 for a node's detail lines.
	depth := func(l string) int {
		if i := strings.Index(l, "->  "); i >= 0 && strings.TrimSpace(l[:i]) == "" {
			return i
		}
		if l != "" && l[0] != ' ' {
			return 0
		}
		return -1
	}
	for i, l := range lines {
		if !strings.Contains(l, detail) {
			continue
		}
		start := i
		for start > 0 && depth(lines[start]) < 0 {
			start--
		}
		d, end := depth(lines[start]), start+1
		for end < len(lines) && (depth(lines[end]) < 0 || depth(lines[end]) > d) {
			end++
		}
		return strings.Join(lines[start:end], "\n")
	}
	return ""
}
