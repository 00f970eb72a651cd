//go:build e2e

package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/pointernote"
)

// The console's pages in headless Chromium (Debian's chromium, as the e2e
// test of the demo), over generated histories: `make e2e` runs them
// (go test -tags e2e -run Browser ./console/).

// chromiumPath finds the browser: $CONFIGPUB_CHROMIUM, else chromium on PATH.
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("CONFIGPUB_CHROMIUM"); p != "" {
		return p
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium found: run scripts/ensure-chromium.sh or set CONFIGPUB_CHROMIUM")
	return ""
}

// browserConsole serves a console (following NOTIFY) over db and opens a
// headless browser at width × 900; it returns the browser context and the
// console's base URL.
func browserConsole(t *testing.T, db *pgtest.DB, opts Options, width int) (context.Context, string) {
	t.Helper()
	ctx, srv := browserConsoleServer(t, db, opts, width)
	return ctx, srv.URL
}

// browserConsoleServer is browserConsole returning the console's server.
func browserConsoleServer(t *testing.T, db *pgtest.DB, opts Options, width int) (context.Context, *httptest.Server) {
	t.Helper()
	c, err := New(context.Background(), viewerPool(t, db, opts.ShowValues), opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(runCtx) }()
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { srv.Close(); stop(); <-done })
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath(t)), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, 900), chromedp.Flag("disable-dev-shm-usage", true))
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelT(); cancel(); cancelA() })
	return ctx, srv
}

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// waitLive waits until the page's live-update status says "live".
func waitLive(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").textContent === "live"`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("live updates never connected: %v", err)
	}
}

// notifyPointer sends the NOTIFY a pointer move of env sends, once the
// page's status no longer shows an earlier update (waitUpdated waits for
// the one this causes).
func notifyPointer(t *testing.T, ctx context.Context, db *pgtest.DB, env string) {
	t.Helper()
	eval[bool](t, ctx, `document.getElementById("live").className = ""; true`)
	note, _ := json.Marshal(pointernote.Note{Host: "h0.example", ServiceID: "svc-0", EnvTag: env})
	if _, err := db.Pool(t).Exec(context.Background(), pointernote.SendSQL, string(note)); err != nil {
		t.Fatal(err)
	}
}

// waitUpdated waits until the page shows a live update after a NOTIFY.
func waitUpdated(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").className === "updated"`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("the page did not update within 5 s of the NOTIFY: %v", err)
	}
}

// TestBrowserFindsATargetByKeyboard: an operator types a host into the
// header's search field on the timeline, presses Enter, reads the hits,
// pages on and opens a target — keyboard only.
func TestBrowserFindsATargetByKeyboard(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 250, releases: 2, changed: 3})
	ctx, base := browserConsole(t, db, Options{}, 1280)
	run(t, ctx, chromedp.Navigate(base+"/env/dev"), chromedp.WaitVisible(chromedp.ID("find-q")),
		chromedp.Focus(chromedp.ID("find-q")), chromedp.SendKeys(chromedp.ID("find-q"), "h1.example\r"),
		chromedp.WaitVisible(chromedp.ID("hits")))
	if n := eval[int](t, ctx, `document.querySelectorAll("#hits tbody tr").length`); n != searchListed {
		t.Errorf("first page lists %d targets, want %d", n, searchListed)
	}
	if loc := eval[string](t, ctx, `location.search`); loc != "?q=h1.example&env=dev" {
		t.Errorf("search from the timeline went to %q, want the timeline's environment", loc)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("search-next")), chromedp.WaitVisible(chromedp.ID("hits")))
	first := eval[string](t, ctx, `document.querySelector("#hits tbody tr a").textContent`)
	if first != "h1.example / svc-150" {
		t.Errorf("second page starts at %q, want h1.example / svc-150", first)
	}
	// The search field keeps the query; Tab from it reaches the results.
	if v := eval[string](t, ctx, `document.getElementById("q").value`); v != "h1.example" {
		t.Errorf("search page's field holds %q", v)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`#hits tbody tr a`)), chromedp.WaitVisible(chromedp.ID("history")))
	if h := eval[string](t, ctx, `document.querySelector("h1").textContent`); !strings.Contains(h, "svc-150") {
		t.Errorf("the hit opened %q", h)
	}
}

// TestBrowserComparesWithTheCurrentRelease: during a rollback the operator
// opens an older release, switches the diff to "the current release" and
// filters it to one audience, then pages back.
func TestBrowserComparesWithTheCurrentRelease(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 250, releases: 4, changed: 60, rollback: true})
	now := releaseAt(4).Add(time.Hour)
	ctx, base := browserConsole(t, db, Options{ShowValues: true, Now: func() time.Time { return now }}, 1280)
	run(t, ctx, chromedp.Navigate(base+"/env/dev/releases/1"), chromedp.WaitVisible(chromedp.ID("against-current")))
	if h := eval[string](t, ctx, `document.getElementById("diff").textContent`); h != "Changes against nothing (first release)" {
		t.Errorf("default diff heading %q", h)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("against-current")), chromedp.WaitVisible(chromedp.ID("changed-count")))
	if h := eval[string](t, ctx, `document.getElementById("diff").textContent`); h != "What changes if this release becomes current: against current release 3" {
		t.Errorf("diff heading against current %q", h)
	}
	if c := eval[string](t, ctx, `document.getElementById("changed-count").textContent`); !strings.HasPrefix(c, "120 target(s) changed") {
		t.Errorf("rolling back to release 1 from 3: %q, want 120 changed", c)
	}
	run(t, ctx, chromedp.SetValue(chromedp.ID("f-audience"), "agent"), chromedp.Click(chromedp.ID("filter")),
		chromedp.WaitVisible(chromedp.ID("clear-filter")))
	if c := eval[string](t, ctx, `document.getElementById("changed-count").textContent`); !strings.HasPrefix(c, "40 target(s) changed for Agent") {
		t.Errorf("filtered to Agent: %q", c)
	}
	if q := eval[string](t, ctx, `location.search`); q != "?against=current&audience=agent&host=" {
		t.Errorf("filter form went to %q", q)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("clear-filter")), chromedp.WaitVisible(chromedp.ID("changed-next")),
		chromedp.Click(chromedp.ID("changed-next")), chromedp.WaitVisible(chromedp.ID("changed-prev")))
	if q := eval[string](t, ctx, `location.search`); q != "?against=current&from=50" {
		t.Errorf("next page of the current-release diff is %q", q)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("changed-prev")), chromedp.WaitVisible(chromedp.ID("changed-next")))
	if eval[bool](t, ctx, `document.getElementById("changed-prev") !== null`) {
		t.Errorf("the first page links a previous one")
	}
}

// TestBrowserFiltersAReleaseByTheStartOfAHost: an operator types the start
// of a host name ("h1") into the release page's host filter and presses
// Enter: the changed targets of every host starting so (h1, h10 and h11
// here) are counted and listed, and paging on keeps the filter. Before, the
// filter matched a whole host name only and "h1" found nothing.
func TestBrowserFiltersAReleaseByTheStartOfAHost(t *testing.T) {
	db := pgtest.New(t)
	// Release 2 changes svc-0..1199 (hosts h0..h11, 100 each).
	generate(t, db.Pool(t), generated{env: "dev", targets: 1500, releases: 2, changed: 1200})
	now := releaseAt(2).Add(time.Hour)
	ctx, base := browserConsole(t, db, Options{Now: func() time.Time { return now }}, 1280)
	run(t, ctx, chromedp.Navigate(base+"/env/dev/releases/2"), chromedp.WaitVisible(chromedp.ID("f-host")),
		chromedp.Focus(chromedp.ID("f-host")), chromedp.SendKeys(chromedp.ID("f-host"), "h1\r"),
		chromedp.WaitVisible(chromedp.ID("clear-filter")))
	if c := eval[string](t, ctx, `document.getElementById("changed-count").textContent`); !strings.HasPrefix(c, "300 target(s) changed on hosts starting h1;") {
		t.Errorf("filtered to hosts starting h1: %q, want 300 changed (h1, h10, h11)", c)
	}
	if q := eval[string](t, ctx, `location.search`); q != "?against=base&audience=&host=h1" {
		t.Errorf("filter form went to %q", q)
	}
	hosts := func() string {
		return eval[string](t, ctx, `[...new Set([...document.querySelectorAll("section.diff h3 a")].map(a => a.textContent.split(" / ")[0]))].sort().join(" ")`)
	}
	// By audience, then host: the first page holds Agents of h1 and h10.
	if h := hosts(); h != "h1.example h10.example" {
		t.Errorf("first page lists the hosts %q, want h1.example h10.example", h)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("changed-next")), chromedp.WaitVisible(chromedp.ID("changed-prev")))
	if q := eval[string](t, ctx, `location.search`); q != "?against=base&from=50&host=h1" {
		t.Errorf("next page of the filtered diff is %q", q)
	}
	if h := eval[string](t, ctx, `document.getElementById("f-host").value`); h != "h1" {
		t.Errorf("the host field holds %q on the next page, want h1", h)
	}
	for _, h := range strings.Fields(hosts()) {
		if !strings.HasPrefix(h, "h1") {
			t.Errorf("the filtered second page lists host %s", h)
		}
	}
}

// TestBrowserLiveUpdateKeepsWhatTheOperatorTyped: a live update swaps the
// page's <main>; what the operator was typing into a form there, and the
// element that had the keyboard focus, stay. Before, every update during
// an incident (several a second) emptied the time-travel form as it was
// typed and sent a keyboard user's focus back to the top of the page.
func TestBrowserLiveUpdateKeepsWhatTheOperatorTyped(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 60, releases: 3, changed: 5, rollback: true})
	ctx, base := browserConsole(t, db, Options{}, 1280)

	run(t, ctx, chromedp.Navigate(base+"/env/dev/at"), chromedp.WaitVisible(chromedp.ID("t")))
	waitLive(t, ctx)
	run(t, ctx, chromedp.SendKeys(chromedp.ID("host"), "h0.example"),
		chromedp.Focus(chromedp.ID("t")), chromedp.SendKeys(chromedp.ID("t"), "2026-01-05T09:3"))
	notifyPointer(t, ctx, db, "dev")
	waitUpdated(t, ctx)
	if v := eval[string](t, ctx, `document.getElementById("t").value + "|" + document.getElementById("host").value`); v != "2026-01-05T09:3|h0.example" {
		t.Errorf("after a live update the form holds %q, want what was typed", v)
	}
	if f := eval[string](t, ctx, `document.activeElement.id + ":" + document.activeElement.selectionStart`); f != "t:15" {
		t.Errorf("after a live update the focus is at %q, want the moment field with the caret at its end", f)
	}
	// Typing on goes on in the same field.
	run(t, ctx, chromedp.KeyEvent("0"))
	if v := eval[string](t, ctx, `document.getElementById("t").value`); v != "2026-01-05T09:30" {
		t.Errorf("typing after the update gives %q", v)
	}

	// A keyboard user on a link deep in the release page stays there; an
	// audience chosen but not yet applied stays chosen.
	run(t, ctx, chromedp.Navigate(base+"/env/dev/releases/2"), chromedp.WaitVisible(chromedp.ID("f-audience")))
	waitLive(t, ctx)
	target := `a[href="/env/dev/targets/h0.example/svc-3"]`
	run(t, ctx, chromedp.SetValue(chromedp.ID("f-audience"), "gateway"), chromedp.Focus(chromedp.CSS(target)))
	notifyPointer(t, ctx, db, "dev")
	waitUpdated(t, ctx)
	if f := eval[string](t, ctx, `document.activeElement.getAttribute("href") || document.activeElement.tagName`); f != "/env/dev/targets/h0.example/svc-3" {
		t.Errorf("after a live update the focus is on %q, want the target link it was on", f)
	}
	if v := eval[string](t, ctx, `document.getElementById("f-audience").value`); v != "gateway" {
		t.Errorf("after a live update the audience filter is %q, want the chosen gateway", v)
	}
}

// TestBrowserLongTextsStayInANarrowWindow: an actor or reason of one long
// word (an e-mail address, a ticket URL) wraps at phone width instead of
// making the whole page scroll sideways: before, the timeline was 742 px
// and the release page 835 px wide at 390.
func TestBrowserLongTextsStayInANarrowWindow(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 20, releases: 2, changed: 3, rollback: false,
		actor:  "alex-on-call-" + strings.Repeat("x", 80) + "@example.com",
		reason: "https://tickets.example.com/INC-4711/" + strings.Repeat("rollbackbecausethegatewayrejected", 8)})
	ctx, base := browserConsole(t, db, Options{}, 1280)
	run(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	for _, p := range []string{"/", "/env/dev", "/env/dev/releases/2", "/env/dev/releases/2?against=current",
		"/env/dev/targets/h0.example/svc-0", "/targets?q=h0", "/env/dev/at"} {
		run(t, ctx, chromedp.Navigate(base+p), chromedp.WaitVisible(chromedp.ID("main")))
		if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 391 {
			t.Errorf("%s is %d px wide at 390", p, w)
		}
	}
}

// TestBrowserReconnectionReadsThePageAgain: a change made while the page's
// event stream was cut (the console restarted, a proxy dropped the
// connection) shows once the stream is back. Before, the page said "live"
// again and kept showing the state from before the cut until the next
// change.
func TestBrowserReconnectionReadsThePageAgain(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 20, releases: 2, changed: 3})
	var now atomic.Int64
	now.Store(releaseAt(2).Add(time.Hour).UnixNano())
	ctx, srv := browserConsoleServer(t, db, Options{Now: func() time.Time { return time.Unix(0, now.Load()) }}, 1280)
	run(t, ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("main")))
	waitLive(t, ctx)
	states := `document.querySelector("main table").textContent.replace(/\s+/g, " ")`
	if s := eval[string](t, ctx, states); !strings.Contains(s, "APPLIED20") {
		t.Fatalf("overview before: %q, want 20 APPLIED", s)
	}
	// Cut the stream, and while it is down every lease ends (a change the
	// page hears nothing about).
	srv.CloseClientConnections()
	now.Store(time.Date(2036, 2, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	notifyPointer(t, ctx, db, "dev")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("main table").textContent.indexOf("LEASE_EXPIRED") >= 0`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(6*time.Second))); err != nil {
		t.Errorf("6 s after the stream was cut the overview still shows %q (live: %q), want LEASE_EXPIRED",
			eval[string](t, ctx, states), eval[string](t, ctx, `document.getElementById("live").textContent`))
	}
}

// TestBrowserTravelsToATimeCopiedFromThePage: a time as the console shows
// it ("2026-01-05 10:01:00Z", from the journal) is a moment the time-travel
// form accepts. Before, it answered 400: only RFC 3339 with a T was.
func TestBrowserTravelsToATimeCopiedFromThePage(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 20, releases: 3, changed: 3, rollback: true})
	ctx, base := browserConsole(t, db, Options{}, 1280)
	run(t, ctx, chromedp.Navigate(base+"/env/dev"), chromedp.WaitVisible(chromedp.ID("release-2")))
	// The journal's time of release 2's promotion, as the page shows it.
	shown := eval[string](t, ctx, `Array.prototype.filter.call(document.querySelectorAll("tr"), function (r) {
		return /promote/.test(r.textContent) && /Release 2/.test(r.textContent); })[0].querySelector("time").textContent`)
	if !strings.HasSuffix(shown, "Z") || !strings.Contains(shown, " ") {
		t.Fatalf("the journal shows the time as %q", shown)
	}
	run(t, ctx, chromedp.Navigate(base+"/env/dev/at"), chromedp.WaitVisible(chromedp.ID("t")),
		chromedp.SendKeys(chromedp.ID("t"), shown), chromedp.Click(chromedp.ID("go")))
	// The form navigates: wait for the answer's page, across the navigation.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.search.indexOf("t=") >= 0 && document.readyState === "complete"`))
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the time-travel form did not answer: %v", err)
		}
	}
	if h := eval[string](t, ctx, `(document.getElementById("answer") || document.querySelector("main")).textContent`); !strings.Contains(h, "dev at "+shown) {
		t.Errorf("time travel to %q: %q", shown, strings.Join(strings.Fields(h), " "))
	}
	if s := eval[string](t, ctx, `document.querySelector("main").textContent`); !strings.Contains(s, "Release 2") {
		t.Errorf("time travel to release 2's promotion does not show release 2")
	}
}

// TestBrowserManyTabsOfTheConsole: an operator opens targets in new tabs
// during an incident. Every tab loads and follows live updates, and when
// the tab holding the shared event stream goes away another takes over.
// Before, each tab held an event stream of its own: Chromium opens at
// most six HTTP/1.1 connections to a host, and the seventh tab of the
// console never loaded.
func TestBrowserManyTabsOfTheConsole(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 20, releases: 2, changed: 3})
	ctx, base := browserConsole(t, db, Options{}, 1280)
	run(t, ctx, chromedp.Navigate(base+"/env/dev"), chromedp.WaitVisible(chromedp.ID("main")))
	waitLive(t, ctx)
	var tabs []context.Context
	for i := 0; i < 8; i++ {
		tab, cancel := chromedp.NewContext(ctx)
		t.Cleanup(cancel)
		run(t, tab) // opens the tab (its life is tab's, not the timeout's below)
		tctx, tcancel := context.WithTimeout(tab, 10*time.Second)
		err := chromedp.Do(tctx, chromedp.Navigate(fmt.Sprintf("%s/env/dev/targets/h0.example/svc-%d", base, i)))
		tcancel()
		if err != nil {
			t.Fatalf("tab %d of the console did not load: %v", i+2, err)
		}
		tabs = append(tabs, tab)
	}
	for i, tab := range tabs {
		if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.getElementById("live").textContent === "live"`,
			chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second))); err != nil {
			t.Errorf("tab %d does not say live: %v", i+2, err)
		}
	}
	last := tabs[len(tabs)-1]
	notifyPointer(t, last, db, "dev")
	waitUpdated(t, last)
	// The first tab (holding the stream) leaves the console.
	run(t, ctx, chromedp.Navigate("about:blank"))
	time.Sleep(1500 * time.Millisecond)
	notifyPointer(t, last, db, "dev")
	waitUpdated(t, last)
}

// TestBrowserPagesBackToNewerReleases: deep in the timeline (or in a time
// travel's targets) the operator pages back up by links. Before, the
// timeline and time travel paged only towards older releases and later
// targets: the way back was the browser's history.
func TestBrowserPagesBackToNewerReleases(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 250, releases: 25, changed: 1})
	ctx, base := browserConsole(t, db, Options{}, 1280)
	run(t, ctx, chromedp.Navigate(base+"/env/dev?before=6"), chromedp.WaitVisible(chromedp.ID("release-5")),
		chromedp.Click(chromedp.ID("newer")), chromedp.WaitVisible(chromedp.ID("release-15")))
	if q := eval[string](t, ctx, `location.search`); q != "?before=16" {
		t.Errorf("newer than releases 5..1 is %q, want ?before=16 (releases 15..6)", q)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("newer")), chromedp.WaitVisible(chromedp.ID("release-25")))
	if eval[bool](t, ctx, `document.getElementById("newer") !== null`) {
		t.Errorf("the first page links newer releases")
	}
	at := releaseAt(25).Add(time.Hour).Format(time.RFC3339)
	run(t, ctx, chromedp.Navigate(base+"/env/dev/at?t="+at+"&from=400"), chromedp.WaitVisible(chromedp.ID("at-prev")),
		chromedp.Click(chromedp.ID("at-prev")), chromedp.WaitVisible(chromedp.ID("at-prev")))
	if q := eval[string](t, ctx, `location.search`); !strings.HasSuffix(q, "&from=200") {
		t.Errorf("the time travel's previous page is %q, want from=200", q)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("at-prev")), chromedp.WaitVisible(chromedp.ID("at-next")))
	if eval[bool](t, ctx, `document.getElementById("at-prev") !== null`) {
		t.Errorf("the time travel's first page links a previous one")
	}
}
