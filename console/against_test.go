package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
)

// TestReleaseDiffAgainstTheCurrentRelease: a release page compares the
// release with its base by default and, with ?against=current, with the
// environment's current release — what activating it, or rolling back to
// it, would change — saying which on the page and in the JSON.
func TestReleaseDiffAgainstTheCurrentRelease(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// Releases 1..4, four targets changed by each after the first, 4
	// rolled back: release 3 is current.
	generate(t, db.Pool(t), generated{env: "dev", targets: 30, releases: 4, changed: 4, rollback: true})
	now := releaseAt(4).Add(time.Hour)
	c, _ := newTestConsole(t, viewerPool(t, db, true), Options{ShowValues: true, Now: func() time.Time { return now }})
	h := c.Handler()
	api := func(path string) ReleaseDetail {
		t.Helper()
		rec := localGet(h, path)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		var d ReleaseDetail
		if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}

	// Against its base (the default): release 1 has none, every target is new.
	if d := api("/api/environments/dev/releases/1"); d.Against != "base" || d.AgainstRelease != 0 || d.ChangedTotal != 30 || d.CurrentRelease != 3 {
		t.Errorf("release 1 against its base: against %q %d, %d changed, current %d; want base 0, 30, 3",
			d.Against, d.AgainstRelease, d.ChangedTotal, d.CurrentRelease)
	}
	// Rolling back to release 1 from 3 moves the 8 targets releases 2 and
	// 3 changed, back from 60 and 61 requests a minute to 120.
	d := api("/api/environments/dev/releases/1?against=current")
	if d.Against != "current" || d.AgainstRelease != 3 || d.ChangedTotal != 8 || len(d.Changed) != 8 {
		t.Fatalf("release 1 against current: against %q %d, %d changed (%d listed); want current 3, 8",
			d.Against, d.AgainstRelease, d.ChangedTotal, len(d.Changed))
	}
	olds := map[string]int{}
	for _, td := range d.Changed {
		if len(td.Changes) != 1 || td.Changes[0].Path != "agentPolicy.limits.requestsPerMinute" || td.Changes[0].New != "120" || td.OldDigest == "" {
			t.Errorf("release 1 against current, %s/%s: %+v, want one change to 120 from the current snapshot", td.Host, td.ServiceID, td.Changes)
			continue
		}
		olds[td.Changes[0].Old]++
	}
	if olds["60"] != 4 || olds["61"] != 4 {
		t.Errorf("release 1 against current: old values %v, want 4 × 60 and 4 × 61", olds)
	}
	// Release 4 (rolled back) against current 3 is its base diff.
	if d := api("/api/environments/dev/releases/4?against=current"); d.AgainstRelease != 3 || d.ChangedTotal != 4 {
		t.Errorf("release 4 against current: against %d, %d changed; want 3, 4", d.AgainstRelease, d.ChangedTotal)
	}
	// The current release against itself changes nothing.
	if d := api("/api/environments/dev/releases/3?against=current"); d.ChangedTotal != 0 || len(d.Retired) != 0 || len(d.Inputs) != 0 {
		t.Errorf("release 3 against current: %d changed, %d retired, %d inputs; want none", d.ChangedTotal, len(d.Retired), len(d.Inputs))
	}

	page := localGet(h, "/env/dev/releases/1?against=current").Body.String()
	mustContain(t, "release 1 page against current", page, "What changes if this release becomes current: against current release 3",
		`id="against-current" aria-current="page"`, "<del>60</del> → <ins>120</ins>", "8 target(s) changed")
	page = localGet(h, "/env/dev/releases/1").Body.String()
	mustContain(t, "release 1 page", page, "Changes against nothing (first release)", `id="against-base" aria-current="page"`,
		`href="/env/dev/releases/1?against=current"`)
	if page := localGet(h, "/env/dev/releases/3?against=current").Body.String(); !strings.Contains(page, "This release is current") {
		t.Errorf("release 3 against current does not say it is current")
	}
	if rec := localGet(h, "/api/environments/dev/releases/1?against=head"); rec.Code != 400 || !strings.Contains(rec.Body.String(), "against") {
		t.Errorf("against=head: %d %s, want 400 naming against", rec.Code, rec.Body)
	}
}
