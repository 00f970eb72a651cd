package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

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
		rec := localGet(h, "/api/environments/dev/releases/2"+query)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", query, rec.Code, rec.Body)
		}
		var d ReleaseDetail
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		return d
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
	} {
		d := api(c.query)
		if d.ChangedTotal != c.total || len(d.Changed) != c.len {
			t.Errorf("%s: %d changed, %d listed; want %d, %d", c.query, d.ChangedTotal, len(d.Changed), c.total, c.len)
		}
		for _, td := range d.Changed {
			if (d.FilterHost != "" && td.Host != d.FilterHost) || (d.FilterAudience != "" && td.Audience != d.FilterAudience) {
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
		"100 target(s) changed on h0.example", `value="h0.example"`, `id="clear-filter"`)
	page = localGet(h, "/env/dev/releases/2?audience=gateway").Body.String()
	mustContain(t, "filtered by audience", page, `<option value="gateway" selected>`, "40 target(s) changed for Gateway")
	if strings.Contains(page, `id="changed-prev"`) || strings.Contains(page, `id="changed-next"`) {
		t.Errorf("one page of 40 links other pages")
	}
	if rec := localGet(h, "/api/environments/dev/releases/2?host=%ff"); rec.Code != 400 || !strings.Contains(rec.Body.String(), "host") {
		t.Errorf("host=%%ff: %d %s, want 400 naming host", rec.Code, rec.Body)
	}
}
