package console

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
)

func TestPrefixEnd(t *testing.T) {
	for p, want := range map[string]string{
		"":                               "",
		"h1":                             "h2",
		"a/":                             "a0",
		"é":                              "ê",
		"a\U0010FFFF":                    "b",
		"\U0010FFFF":                     "",
		"x\uD7FF":                        "x\uE000",
		"h1.example/svc-1\u007f":         "h1.example/svc-1\u0080",
		"host/" + strings.Repeat("z", 3): "host/zz{",
	} {
		if got := prefixEnd(p); got != want {
			t.Errorf("prefixEnd(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestTargetSearchFindsOneTarget: the search finds targets by the start of
// their identity (host, host/service) or of their service ID, in one
// environment or all, a page at a time, and its statement is index scans
// of migration 28's indexes with a generic plan (no scan of every pointer).
func TestTargetSearchFindsOneTarget(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	owner := db.Pool(t)
	generate(t, owner, generated{env: "dev", targets: 250, releases: 2, changed: 3})
	generate(t, owner, generated{env: "prd", targets: 30, releases: 1})
	now := releaseAt(2).Add(time.Hour)
	c, _ := newTestConsole(t, viewerPool(t, db, false), Options{Now: func() time.Time { return now }})
	h := c.Handler()
	search := func(query string) TargetSearch {
		t.Helper()
		return localJSON[TargetSearch](t, h, "/api/targets?"+query)
	}
	names := func(s TargetSearch) string {
		var out []string
		for _, h := range s.Targets {
			out = append(out, h.EnvTag+":"+h.Host+"/"+h.ServiceID)
		}
		return strings.Join(out, " ")
	}

	// A service ID's start, in every environment.
	s := search("q=svc-12")
	want := "dev:h0.example/svc-12 dev:h1.example/svc-120 dev:h1.example/svc-121 dev:h1.example/svc-122 dev:h1.example/svc-123 " +
		"dev:h1.example/svc-124 dev:h1.example/svc-125 dev:h1.example/svc-126 dev:h1.example/svc-127 dev:h1.example/svc-128 " +
		"dev:h1.example/svc-129 prd:h0.example/svc-12"
	if got := names(s); got != want || s.Next != 0 {
		t.Errorf("q=svc-12: %s (next %d), want %s", got, s.Next, want)
	}
	// One target by its identity, first of those it is a prefix of
	// (svc-70..79), with its pointer.
	s = search("q=" + url.QueryEscape("h0.example/svc-7") + "&env=dev")
	if len(s.Targets) != 11 || s.Targets[0].ServiceID != "svc-7" || s.Targets[0].Audience == "" ||
		!strings.HasPrefix(s.Targets[0].ArtifactDigest, "sha256:") || s.Targets[0].SnapshotRelease == 0 {
		t.Errorf("q=h0.example/svc-7&env=dev: %+v, want svc-7 with its pointer first of 11", s.Targets)
	}
	// Identities are lowercase: a query typed in capitals finds the same.
	if got := names(search("q=SVC-12")); got != want {
		t.Errorf("q=SVC-12: %s, want what q=svc-12 finds: %s", got, want)
	}
	// A host: 100 targets, two pages.
	p1 := search("q=h1.example&env=dev")
	p2 := search(fmt.Sprintf("q=h1.example&env=dev&from=%d", p1.Next))
	if len(p1.Targets) != searchListed || p1.Next != searchListed || len(p2.Targets) != 100-searchListed || p2.Next != 0 ||
		p2.From != searchListed || p1.Targets[searchListed-1].ServiceID >= p2.Targets[0].ServiceID {
		t.Errorf("q=h1.example: pages of %d (next %d) and %d (next %d), want %d and %d in order",
			len(p1.Targets), p1.Next, len(p2.Targets), p2.Next, searchListed, 100-searchListed)
	}
	// An environment alone lists its targets.
	if s := search("env=prd"); len(s.Targets) != 30 || s.Next != 0 {
		t.Errorf("env=prd: %d targets (next %d), want 30", len(s.Targets), s.Next)
	}
	if s := search("q=nosuch"); len(s.Targets) != 0 || s.Targets == nil {
		t.Errorf("q=nosuch: %+v, want an empty list", s.Targets)
	}
	if rec := localGet(h, "/api/targets?q=h1&env=dve"); rec.Code != 404 || !strings.Contains(rec.Body.String(), "environment dve") {
		t.Errorf("env=dve (no such environment): %d %s, want 404 naming it", rec.Code, rec.Body)
	}
	if rec := localGet(h, "/api/targets?q=no-such-host&env=dev"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"targets": []`) {
		t.Errorf("q=no-such-host&env=dev: %d %s, want 200 and no targets", rec.Code, rec.Body)
	}
	if rec := localGet(h, "/api/targets?q=%ff"); rec.Code != 400 || !strings.Contains(rec.Body.String(), "q is not text") {
		t.Errorf("q=%%ff: %d %s, want 400 naming q", rec.Code, rec.Body)
	}

	// The page: a form, links to each target and to the next page.
	page := localGet(h, "/targets?q=h1.example&env=dev").Body.String()
	mustContain(t, "search page", page, `href="/env/dev/targets/h1.example/svc-100"`, `id="search-next"`,
		`href="/targets?q=h1.example&amp;env=dev&amp;from=50"`, `role="search"`)
	if tl := localGet(h, "/env/dev").Body.String(); !strings.Contains(tl, `name="env" value="dev"`) {
		t.Errorf("the timeline's search form does not search its environment")
	}

	// The statement with a generic plan: both branches are index scans
	// (over 20,000 targets a search for one takes 0.1 ms so).
	ctx := context.Background()
	if _, err := owner.Exec(ctx, "ANALYZE configpub.current_pointer"); err != nil {
		t.Fatal(err)
	}
	tx, err := owner.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	sql, args := c.rd.searchSQL("h1.example/svc-1", "", 0)
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "PREPARE s AS "+sql); err != nil {
		t.Fatal(err)
	}
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = fmt.Sprintf("'%v'", a)
	}
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE s("+strings.Join(lits, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if p := plan.String(); !strings.Contains(p, "current_pointer_identity_prefix") || !strings.Contains(p, "current_pointer_service_prefix") ||
		strings.Contains(p, "Seq Scan on current_pointer") {
		t.Errorf("the search is not two index scans:\n%s", p)
	}
}
