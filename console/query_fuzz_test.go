package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
)

// FuzzConsoleQuery: whatever path and query string an operator's browser
// sends (a hand-edited URL: paging cursors, times, host prefixes), the
// console answers it from a real PostgreSQL over a generated history with
// a page or a 4xx, never a 5xx: bad input is the operator's to fix, named
// as such, not a server error. A 200 from /api/ is one JSON document.
func FuzzConsoleQuery(f *testing.F) {
	for _, p := range []string{
		"/api/environments",
		"/api/environments/dev/timeline?before=3",
		"/api/environments/dev/releases/2?from=50&against=current&audience=agent&host=h1",
		"/api/environments/dev/targets/h0.example/svc-0",
		"/api/environments/dev/at?t=2026-01-05T11:30:00Z",
		"/api/environments/dev/at?t=2026-01-05%2011:30:00Z&host=h0.example&service=svc-0",
		"/api/environments/dev/at?t=0001-01-01T00:00:00Z&from=9223372036854775807",
		"/api/targets?q=h1.example/svc-1&env=dev&from=50",
		"/api/targets?q=%F4%8F%BF%BF",
		"/targets?q=SVC-1",
		"/env/dev",
		"/env/dev/releases/2?from=1",
		"/env/dev/at?t=2026-01-05T11:30",
	} {
		f.Add(p)
	}
	db := pgtest.New(f)
	generate(f, db.Pool(f), generated{env: "dev", targets: 60, releases: 3, changed: 4, rollback: true})
	now := releaseAt(3).Add(2 * time.Hour)
	c, err := New(context.Background(), viewerPool(f, db, true), Options{ShowValues: true, Now: func() time.Time { return now }})
	if err != nil {
		f.Fatal(err)
	}
	h := c.Handler()
	f.Fuzz(func(t *testing.T, target string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsFunc(target, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return // not a request line's target: no client sends it
		}
		if _, err := url.ParseRequestURI(target); err != nil {
			return // no browser sends it; net/http refuses it before the console
		}
		rec := localGet(h, target)
		if rec.Code >= 500 {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		if rec.Code == 200 && strings.HasPrefix(target, "/api/") && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("GET %s: 200 with a body that is not JSON", target)
		}
	})
}

// FuzzTargetSearch: a target search finds exactly the targets whose
// identity (host/serviceId) or service ID starts with the query (spaces
// around it trimmed, capitals lowered), in key order, a page at a time,
// as a plain prefix filter over every target finds them; whatever the
// query's characters (the prefix range ends at the next code point).
func FuzzTargetSearch(f *testing.F) {
	for _, q := range []string{"", "h1", "h1.example/", "h1.example/svc-1", "svc-1", "SVC-1 ", "h", "h1.example/svc-1\U0010FFFF", "svc-\uD7FF", "é", "/", "h0.example/svc-"} {
		f.Add(q, 0)
	}
	db := pgtest.New(f)
	generate(f, db.Pool(f), generated{env: "dev", targets: 120, releases: 1})
	generate(f, db.Pool(f), generated{env: "prd", targets: 20, releases: 1})
	c, err := New(context.Background(), viewerPool(f, db, false), Options{CacheTTL: -1, Now: func() time.Time { return releaseAt(1).Add(time.Hour) }})
	if err != nil {
		f.Fatal(err)
	}
	h := c.Handler()
	var all []TargetHit // every target, in key order
	for from := 0; ; {
		var s TargetSearch
		if err := json.Unmarshal(localGet(h, fmt.Sprintf("/api/targets?from=%d", from)).Body.Bytes(), &s); err != nil {
			f.Fatal(err)
		}
		all = append(all, s.Targets...)
		if s.Next == 0 {
			break
		}
		from = s.Next
	}
	if len(all) != 140 {
		f.Fatalf("listed %d targets, want 140", len(all))
	}
	f.Fuzz(func(t *testing.T, q string, page int) {
		from := (page % 4) * searchListed
		if from < 0 {
			from = -from
		}
		rec := localGet(h, "/api/targets?q="+url.QueryEscape(q)+fmt.Sprintf("&from=%d", from))
		if rec.Code != 200 {
			if rec.Code >= 500 {
				t.Fatalf("q=%q: %d %s", q, rec.Code, rec.Body)
			}
			return
		}
		var got TargetSearch
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		p := strings.ToLower(strings.TrimSpace(q))
		var want []string
		for _, x := range all {
			if strings.HasPrefix(x.Host+"/"+x.ServiceID, p) || strings.HasPrefix(x.ServiceID, p) {
				want = append(want, x.EnvTag+":"+x.Host+"/"+x.ServiceID)
			}
		}
		want = want[min(from, len(want)):]
		next := 0
		if len(want) > searchListed {
			want, next = want[:searchListed], from+searchListed
		}
		var names []string
		for _, x := range got.Targets {
			names = append(names, x.EnvTag+":"+x.Host+"/"+x.ServiceID)
		}
		if strings.Join(names, " ") != strings.Join(want, " ") || got.Next != next {
			t.Fatalf("q=%q from=%d: found %v (next %d), want %v (next %d)", q, from, names, got.Next, want, next)
		}
	})
}
