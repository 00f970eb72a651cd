package compiler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/forgery"
	"github.com/configpub/configpub/internal/gen"
)

// TestActivationWindowReissue: a release carries an unchanged target over
// only while the target's activation window (validFrom..expiresAt, the
// production profile's three weeks) still contains the release's createdAt;
// past it the target becomes a new snapshot of the release, and the result
// says why. Over a simulated year of releases at irregular intervals,
// every target of every release is activatable at the release's createdAt,
// and a recompile reproduces each release byte for byte.
func TestActivationWindowReissue(t *testing.T) {
	dir := copyRepo(t)
	h := &history{dir: dir, env: "prod", releases: map[int64][]byte{}}
	r1 := h.compile(t, time.Time{})
	created, _ := bundle.ParseTime(r1.Manifest.CreatedAt)
	advisor := "com.networknt.agent-advisor-1.0.0"
	window := 504 * time.Hour

	// Each step changes the account agent only; gaps in days.
	gaps := []time.Duration{
		20 * 24 * time.Hour, // inside the advisor's window
		24 * time.Hour,      // release 2+1 day: release 1's window ends exactly here
		10 * 24 * time.Hour,
		window,               // exactly at the end of the previous snapshots' window
		window - time.Second, // one second before
		45 * 24 * time.Hour,
		7 * 24 * time.Hour, 7 * 24 * time.Hour, 7 * 24 * time.Hour,
		90 * 24 * time.Hour,
		30 * 24 * time.Hour, 30 * 24 * time.Hour, 30 * 24 * time.Hour, 30 * 24 * time.Hour,
	}
	at := created
	rate := 120
	keptEarlier := false
	rollback := map[bool]int{} // steps after which a rollback to the release before is possible / refused
	prevRes := r1
	for i, gap := range gaps {
		at = at.Add(gap)
		prev := h.releases[int64(i+1)]
		pm, err := bundle.ParseManifest("prev", prev)
		if err != nil {
			t.Fatal(err)
		}
		edit(t, filepath.Join(dir, "agents/account.yaml"), fmt.Sprintf("requestsPerMinute: %d", rate), fmt.Sprintf("requestsPerMinute: %d", rate+1))
		rate++
		res := h.release(t, at)
		m := res.Manifest
		if m.ReleaseVersion != int64(i+2) {
			t.Fatalf("step %d: release %d, want %d", i, m.ReleaseVersion, i+2)
		}
		reissued := map[string]string{}
		for _, r := range res.Reissued {
			reissued[r.ServiceID] = r.Reason
		}
		for _, e := range m.Targets {
			from, _ := bundle.ParseTime(e.ValidFrom)
			until, _ := bundle.ParseTime(e.ExpiresAt)
			if at.Before(from) || !at.Before(until) {
				t.Errorf("release %d at %s: %s window %s..%s does not contain the release's createdAt", m.ReleaseVersion, at.Format(time.RFC3339), e.ServiceID, e.ValidFrom, e.ExpiresAt)
			}
			if e.ReleaseVersion != m.ReleaseVersion && until.Before(at.Add(window)) {
				keptEarlier = true // promotion does not wait for it
			}
			old := pm.Target(e.Host, e.ServiceID)
			oldUntil, _ := bundle.ParseTime(old.ExpiresAt)
			expired := !at.Before(oldUntil)
			if e.ServiceID == advisor {
				// The advisor never changes: carried over exactly while
				// its window lasts, re-issued (with a reason) after.
				if carried := e.SnapshotID == old.SnapshotID; carried == expired {
					t.Errorf("release %d: advisor carried over = %v with its window ending %s and createdAt %s", m.ReleaseVersion, carried, old.ExpiresAt, at.Format(time.RFC3339))
				}
				if r := reissued[advisor]; expired != (r != "") || (expired && !strings.Contains(r, old.ExpiresAt)) {
					t.Errorf("release %d: advisor re-issue reason %q (expired %v)", m.ReleaseVersion, r, expired)
				}
				if !expired && (e.ReleaseVersion != old.ReleaseVersion || e.PublicationID != old.PublicationID) {
					t.Errorf("release %d: carried advisor changed its release/publication", m.ReleaseVersion)
				}
				if expired && (e.ReleaseVersion != m.ReleaseVersion || e.PublicationID != bundle.PublicationID("prod", m.ReleaseVersion) || e.CreatedAt != m.CreatedAt) {
					t.Errorf("release %d: re-issued advisor is not a snapshot of this release: %+v", m.ReleaseVersion, e)
				}
			}
		}
		// The release can be promoted for as long as the snapshots it
		// creates (every one created at its createdAt) can be activated,
		// however early the windows of the snapshots it keeps end; a
		// result prepared for streaming still says so.
		wantFrom, wantUntil := at.Format(bundle.TimeFormat), at.Add(window).Format(bundle.TimeFormat)
		if from, until := res.PromotionWindow(); from != wantFrom || until != wantUntil {
			t.Errorf("release %d: promotable %s..%s, want %s..%s", m.ReleaseVersion, from, until, wantFrom, wantUntil)
		}
		// Every target can be moved to the release from the latest start
		// to the earliest end of all its snapshots' windows, kept ones
		// included. When the release before it could no longer be moved
		// to in whole at this release's createdAt, this release re-issued
		// a target whose window ended, so a rollback to it is refused.
		actFrom, actUntil := "", ""
		for _, e := range m.Targets {
			if actFrom == "" || e.ValidFrom > actFrom {
				actFrom = e.ValidFrom
			}
			if actUntil == "" || e.ExpiresAt < actUntil {
				actUntil = e.ExpiresAt
			}
		}
		if from, until := res.ActivationWindow(); from != actFrom || until != actUntil {
			t.Errorf("release %d: activatable %s..%s, want %s..%s", m.ReleaseVersion, from, until, actFrom, actUntil)
		}
		_, prevUntil := prevRes.ActivationWindow()
		ended := prevUntil <= at.Format(bundle.TimeFormat)
		rollback[!ended]++
		if ended {
			refused := false
			for _, e := range m.Targets {
				if old := pm.Target(e.Host, e.ServiceID); old.SnapshotID != e.SnapshotID && old.ExpiresAt <= at.Format(bundle.TimeFormat) {
					refused = true
				}
			}
			if !refused {
				t.Errorf("release %d: release %d's window ended at %s, yet no target moves off a snapshot whose window ended", m.ReleaseVersion, i+1, prevUntil)
			}
		}
		streamed, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "prod",
			CreatedAt: at.Add(time.Hour), Previous: h.lookup, ManifestOnly: true})
		if err != nil || !streamed.UpToDate {
			t.Fatalf("release %d: manifest-only recompile: %v, up to date %v", m.ReleaseVersion, err, streamed != nil && streamed.UpToDate)
		}
		streamed.ForStreaming()
		if from, until := streamed.PromotionWindow(); streamed.Manifest.Targets != nil || from != wantFrom || until != wantUntil {
			t.Errorf("release %d streamed: promotable %s..%s, want %s..%s", m.ReleaseVersion, from, until, wantFrom, wantUntil)
		}
		if from, until := streamed.ActivationWindow(); from != actFrom || until != actUntil {
			t.Errorf("release %d streamed: activatable %s..%s, want %s..%s", m.ReleaseVersion, from, until, actFrom, actUntil)
		}
		prevRes = res
		again, err := h.try(at.Add(24 * time.Hour))
		if err != nil || !again.UpToDate {
			t.Fatalf("release %d: recompile not up to date: %v %v", m.ReleaseVersion, err, again.Stale())
		}
	}
	if !keptEarlier {
		t.Fatal("no release kept a snapshot whose window ends before its own snapshots' windows")
	}
	if rollback[true] == 0 || rollback[false] == 0 {
		t.Fatalf("rollback to the release before possible after %d steps, refused after %d: want both", rollback[true], rollback[false])
	}
}

// TestPlanExplainsReissue: plan names the reason a target whose sources did
// not change gets a new snapshot.
func TestPlanExplainsReissue(t *testing.T) {
	dir := copyRepo(t)
	h := &history{dir: dir, env: "prod", releases: map[int64][]byte{}}
	base := h.compile(t, time.Time{})
	created, _ := bundle.ParseTime(base.Manifest.CreatedAt)
	edit(t, filepath.Join(dir, "agents/account.yaml"), "requestsPerMinute: 120", "requestsPerMinute: 121")
	head, err := h.try(created.Add(30 * 24 * time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p, err := compiler.NewPlan(base, head, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changed {
		if c.ServiceID == "com.networknt.agent-advisor-1.0.0" {
			if !strings.Contains(c.Reason, "could be activated until") {
				t.Fatalf("advisor reason %q does not explain the re-issue", c.Reason)
			}
			return
		}
	}
	t.Fatalf("advisor not in the plan: %+v", p.Changed)
}

// TestRenewReissuesWhatCanNoLongerBeActivated: with Renew, an up-to-date
// release N is followed by release N+1 that re-issues exactly the targets
// whose snapshot's window no longer contains the new createdAt (same
// content, new snapshot) and keeps every other snapshot; inside every
// window it leaves release N alone. The renewal derives like any release,
// and without Renew the same compile is up to date.
func TestRenewReissuesWhatCanNoLongerBeActivated(t *testing.T) {
	ctx := context.Background()
	dir := copyRepo(t)
	h := &history{dir: dir, env: "prod", releases: map[int64][]byte{}}
	r1 := h.compile(t, time.Time{})
	if !r1.UpToDate {
		t.Fatal("the fixture's release is not up to date")
	}
	compile := func(at time.Time, renew, check bool) *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "prod", CreatedAt: at, Previous: h.lookup, Renew: renew, CheckOnly: check})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	created, _ := bundle.ParseTime(r1.Manifest.CreatedAt)
	if in := compile(created.Add(24*time.Hour), true, false); !in.Unchanged() || in.Manifest.ReleaseVersion != 1 || len(in.Reissued) != 0 {
		t.Fatalf("renew inside every window: release %d, unchanged %v, %d re-issued; want release 1 left alone",
			in.Manifest.ReleaseVersion, in.Unchanged(), len(in.Reissued))
	}
	// Release 2 changes the account agent ten days in: its snapshot's
	// window ends ten days after the others'.
	edit(t, filepath.Join(dir, "agents/account.yaml"), "requestsPerMinute: 120", "requestsPerMinute: 121")
	base := h.release(t, created.Add(10*24*time.Hour))
	_, end := r1.ActivationWindow() // the first window to end
	at, _ := bundle.ParseTime(end)
	if plain := compile(at, false, false); !plain.UpToDate || plain.Manifest.ReleaseVersion != 2 {
		t.Fatalf("compile without Renew after a window ended: release %d, up to date %v; want release 2 up to date", plain.Manifest.ReleaseVersion, plain.UpToDate)
	}
	if chk := compile(at, true, true); !chk.UpToDate || chk.Manifest.ReleaseVersion != 2 {
		t.Fatalf("Renew with CheckOnly: release %d, up to date %v; want the committed release checked", chk.Manifest.ReleaseVersion, chk.UpToDate)
	}
	r3 := compile(at, true, false)
	m := r3.Manifest
	if m.ReleaseVersion != 3 || m.BaseReleaseVersion != 2 || m.CreatedAt != end || r3.Unchanged() {
		t.Fatalf("renewal: release %d on %d at %s (unchanged %v); want release 3 on 2 at %s", m.ReleaseVersion, m.BaseReleaseVersion, m.CreatedAt, r3.Unchanged(), end)
	}
	reissued := map[string]bool{}
	for _, r := range r3.Reissued {
		reissued[r.Host+"/"+r.ServiceID] = true
	}
	var renewed, kept int
	for _, e := range m.Targets {
		old := base.Manifest.Target(e.Host, e.ServiceID)
		id := e.Host + "/" + e.ServiceID
		switch ended := old.ExpiresAt <= end; {
		case ended:
			// A new snapshot of release 3: an Agent's with the same policy
			// and a re-issue reason; a Gateway's or Knowledge service's
			// policy lists the bound Agents' publications, which changed.
			renewed++
			same := e.PolicyDigest == old.PolicyDigest && e.PropertySetDigest == old.PropertySetDigest && reissued[id]
			if e.SnapshotID == old.SnapshotID || e.ReleaseVersion != 3 || !e.Changed || (e.Audience == "agent" && !same) {
				t.Errorf("%s: window ended %s, entry %s/%d changed %v same policy %v; want a re-issued snapshot of release 3",
					id, old.ExpiresAt, e.SnapshotID, e.ReleaseVersion, e.Changed, same)
			}
		case e.Audience == "agent":
			kept++
			if e.SnapshotID != old.SnapshotID || e.Changed || reissued[id] {
				t.Errorf("%s: window ends %s, after the renewal, yet its snapshot was not kept", id, old.ExpiresAt)
			}
		default:
			// Not re-issued; it changes only with the publications of the
			// Agents bound to it.
			if reissued[id] || e.Changed != (e.ContentDigest != old.ContentDigest) {
				t.Errorf("%s: window ends %s, after the renewal: re-issued %v, changed %v with content %s -> %s",
					id, old.ExpiresAt, reissued[id], e.Changed, old.ContentDigest, e.ContentDigest)
			}
		}
	}
	if renewed == 0 || kept == 0 || len(r3.Reissued) == 0 || len(r3.Reissued) > renewed {
		t.Fatalf("%d targets renewed, %d kept, %d re-issue reasons; want both, and reasons for ended targets only", renewed, kept, len(r3.Reissued))
	}
	if err := compiler.Write(ctx, r3, dir, ""); err != nil {
		t.Fatal(err)
	}
	h.releases[3] = r3.ManifestBytes
	if chk := compile(at.Add(time.Hour), false, true); !chk.UpToDate || chk.Manifest.ReleaseVersion != 3 {
		t.Fatalf("the renewal does not derive: release %d, up to date %v, %v", chk.Manifest.ReleaseVersion, chk.UpToDate, chk.Stale())
	}
}

// TestRenewBeforeKeepsARollbackTarget: with a lease profile's renewBefore
// longer than a day, a daily renewal (Renew) re-issues every snapshot that
// long before its window ends, so that over simulated months, with changes
// in between, the newest release can be activated — rolled back to after
// the next change — on every day; without it, on the day a window ends the
// newest release can no longer be — with a renewSpread too, whose renewals
// come earlier, host by host. Setting renewBefore (or renewSpread) changes
// no snapshot by itself, and every release recompiles up to date.
func TestRenewBeforeKeepsARollbackTarget(t *testing.T) {
	ctx := context.Background()
	const day = 24 * time.Hour
	for _, c := range []struct {
		renewBefore time.Duration
		spread      string
	}{{0, ""}, {7 * day, ""}, {7 * day, "168h"}} {
		renewBefore := c.renewBefore
		t.Run(fmt.Sprintf("renewBefore=%s,renewSpread=%s", renewBefore, c.spread), func(t *testing.T) {
			dir := copyRepo(t)
			h := &history{dir: dir, env: "prod", releases: map[int64][]byte{}}
			r1 := h.compile(t, time.Time{})
			created, _ := bundle.ParseTime(r1.Manifest.CreatedAt)
			latest := r1
			if renewBefore > 0 {
				profile := "validFor: 504h        # three weeks\n      renewBefore: 168h"
				if c.spread != "" {
					profile += "\n      renewSpread: " + c.spread
				}
				edit(t, filepath.Join(dir, "configpub.yaml"), "validFor: 504h        # three weeks", profile)
				res := h.release(t, created.Add(time.Hour))
				for _, e := range res.Manifest.Targets {
					if old := r1.Manifest.Target(e.Host, e.ServiceID); old == nil || old.SnapshotID != e.SnapshotID {
						t.Fatalf("setting renewBefore changed %s/%s's snapshot", e.Host, e.ServiceID)
					}
				}
				latest = res
			}
			rate := 120
			var notActivatable, reissued, releases int
			for d := 1; d <= 150; d++ {
				at := created.Add(time.Duration(d) * day)
				// The newest release, as an operator would roll back to it
				// after the next change: activatable today?
				if from, until := latest.ActivationWindow(); from > at.Format(bundle.TimeFormat) || until <= at.Format(bundle.TimeFormat) {
					notActivatable++
				}
				change := d%9 == 0
				if change {
					edit(t, filepath.Join(dir, "agents/account.yaml"), fmt.Sprintf("requestsPerMinute: %d", rate), fmt.Sprintf("requestsPerMinute: %d", rate+1))
					rate++
				}
				res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "prod", CreatedAt: at, Previous: h.lookup, Renew: true})
				if err != nil {
					t.Fatal(err)
				}
				if res.Unchanged() {
					if change {
						t.Fatalf("day %d: a source change wrote no release", d)
					}
					continue
				}
				h.releases[res.Manifest.ReleaseVersion] = res.ManifestBytes
				if err := compiler.Write(ctx, res, dir, ""); err != nil {
					t.Fatal(err)
				}
				releases++
				reissued += len(res.Reissued)
				want := "less than renewBefore 168h (lease profile production) after this release's createdAt"
				if c.spread != "" {
					want = "last renewal time (one every renewSpread " + c.spread + ") at least renewBefore 168h before then (lease profile production)"
				}
				for _, r := range res.Reissued {
					if renewBefore > 0 && !strings.Contains(r.Reason, want) {
						t.Errorf("day %d: %s re-issued because %q; want %q", d, r.ServiceID, r.Reason, want)
					}
				}
				if _, until := res.ActivationWindow(); renewBefore > 0 && until <= at.Add(renewBefore).Format(bundle.TimeFormat) {
					t.Errorf("day %d: release %d can be activated until %s, not past createdAt + renewBefore", d, res.Manifest.ReleaseVersion, until)
				}
				if again, err := h.try(at.Add(time.Hour)); err != nil || !again.UpToDate {
					t.Fatalf("day %d: release %d does not recompile up to date: %v", d, res.Manifest.ReleaseVersion, err)
				}
				latest = res
			}
			t.Logf("renewBefore %s, renewSpread %q: %d releases, %d re-issues, %d days without an activatable newest release", renewBefore, c.spread, releases, reissued, notActivatable)
			if reissued == 0 {
				t.Fatal("150 days of releases re-issued nothing")
			}
			if renewBefore > 0 && notActivatable != 0 {
				t.Errorf("renewBefore %s: on %d days the newest release could not be activated; want none", renewBefore, notActivatable)
			}
			if renewBefore == 0 && notActivatable == 0 {
				t.Error("without renewBefore every day had an activatable newest release: the renewal is not late, the test proves nothing")
			}
		})
	}
}

// TestRenewSpreadSpreadsRenewalsOverHosts: the targets one release created
// share their activation windows, so with renewBefore alone every later
// renewal re-issues all of them at once — at 100,000 targets a promotion
// moving every pointer once every validFor − renewBefore. A lease profile's
// renewSpread gives each host renewal times of its own, one every
// renewSpread at the host's offset, and re-issues the host's snapshots at
// the last of them before renewBefore: over 60 simulated days of a daily
// compile --renew (no source change) on 24 generated hosts, no renewal
// re-issues more than 10 of the hosts, the first wave is spread over
// several days, and the newest release can be activated every day as with
// renewBefore alone. Each host keeps its day: after its first renewal
// (up to renewSpread early) a host is renewed exactly every
// validFor − renewBefore, as without the spread, so it costs no renewals
// in the long run.
func TestRenewSpreadSpreadsRenewalsOverHosts(t *testing.T) {
	const (
		day   = 24 * time.Hour
		hosts = 24
	)
	epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, spread := range []string{"0s", "168h"} {
		t.Run("renewSpread="+spread, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			if err := gen.Write(dir, gen.Options{Targets: hosts * 4, AgentsPerHost: 2, EnvTag: "bench"}); err != nil {
				t.Fatal(err)
			}
			h := &history{dir: dir, env: "bench", releases: map[int64][]byte{}}
			r1 := h.release(t, epoch)
			edit(t, filepath.Join(dir, "configpub.yaml"), "validFor: 504h\n", "validFor: 504h\n      renewBefore: 168h\n      renewSpread: "+spread+"\n")
			latest := h.release(t, epoch.Add(time.Hour))
			for _, e := range latest.Manifest.Targets {
				if old := r1.Manifest.Target(e.Host, e.ServiceID); old == nil || old.SnapshotID != e.SnapshotID {
					t.Fatalf("setting renewSpread %s changed %s/%s's snapshot", spread, e.Host, e.ServiceID)
				}
			}
			var (
				maxHosts, reissued, notActivatable int
				firstWave                          = map[int]bool{}     // days on which some host was first re-issued
				renewed                            = map[string][]int{} // days each host was renewed
			)
			for d := 1; d <= 60; d++ {
				at := epoch.Add(time.Duration(d) * day)
				if from, until := latest.ActivationWindow(); from > at.Format(bundle.TimeFormat) || until <= at.Format(bundle.TimeFormat) {
					notActivatable++
				}
				res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "bench", CreatedAt: at, Previous: h.lookup, Renew: true})
				if err != nil {
					t.Fatal(err)
				}
				if res.Unchanged() {
					continue
				}
				h.releases[res.Manifest.ReleaseVersion] = res.ManifestBytes
				if err := compiler.Write(ctx, res, dir, ""); err != nil {
					t.Fatal(err)
				}
				byHost := map[string]bool{}
				for _, r := range res.Reissued {
					byHost[r.Host] = true
					want := "less than renewBefore 168h (lease profile production)"
					if spread != "0s" {
						want = "host " + r.Host + "'s last renewal time (one every renewSpread 168h) at least renewBefore 168h before then (lease profile production)"
					}
					if !strings.Contains(r.Reason, want) {
						t.Fatalf("day %d: %s/%s re-issued because %q; want %q", d, r.Host, r.ServiceID, r.Reason, want)
					}
				}
				for host := range byHost {
					if renewed[host] == nil {
						firstWave[d] = true
					}
					renewed[host] = append(renewed[host], d)
				}
				maxHosts = max(maxHosts, len(byHost))
				reissued += len(res.Reissued)
				if again, err := h.try(at.Add(time.Hour)); err != nil || !again.UpToDate {
					t.Fatalf("day %d: release %d does not recompile up to date: %v", d, res.Manifest.ReleaseVersion, err)
				}
				latest = res
			}
			t.Logf("renewSpread %s: at most %d of %d hosts re-issued by one renewal; first wave over %d days; %d re-issues in 60 days; %d days without an activatable newest release",
				spread, maxHosts, hosts, len(firstWave), reissued, notActivatable)
			if len(renewed) != hosts {
				t.Fatalf("%d of %d hosts renewed in 60 days", len(renewed), hosts)
			}
			if notActivatable != 0 {
				t.Errorf("on %d days the newest release could not be activated; want none", notActivatable)
			}
			for host, days := range renewed {
				for i := 1; i < len(days); i++ {
					if days[i]-days[i-1] != 14 {
						t.Errorf("host %s renewed on days %v; want every 14 days (validFor − renewBefore) after the first", host, days)
						break
					}
				}
			}
			switch spread {
			case "0s":
				if maxHosts != hosts || len(firstWave) != 1 {
					t.Errorf("without renewSpread one renewal should re-issue every host (the wave the spread avoids): at most %d, first wave over %d days", maxHosts, len(firstWave))
				}
			default:
				if maxHosts > 10 || len(firstWave) < 5 {
					t.Errorf("with renewSpread %s a renewal re-issued up to %d of %d hosts, the first wave over %d days; want at most 10 hosts and at least 5 days",
						spread, maxHosts, hosts, len(firstWave))
				}
			}
		})
	}
}

// TestRenewalsMustLeaveTheWindow: a renewBefore as long as the window
// would re-issue every snapshot at every release, and renewBefore plus
// renewSpread as long as it every snapshot of some host; the compile
// refuses either, naming the field.
func TestRenewalsMustLeaveTheWindow(t *testing.T) {
	for _, c := range []struct{ field, profile, want string }{
		{"renewBefore", "renewBefore: 504h", "renewBefore 504h must be shorter than validFor 504h"},
		{"renewBefore", "renewBefore: 0s", ""},
		{"renewBefore", "renewBefore: 167h", ""},
		{"renewSpread", "renewBefore: 168h\n      renewSpread: 336h", "renewBefore 168h plus renewSpread 336h must be shorter than validFor 504h"},
		{"renewSpread", "renewSpread: 504h", "renewBefore 0s plus renewSpread 504h must be shorter than validFor 504h"},
		{"renewSpread", "renewBefore: 168h\n      renewSpread: -1h", "renewSpread"}, // the schema's duration pattern
		{"renewSpread", "renewBefore: 168h\n      renewSpread: soon", "renewSpread"},
		{"renewSpread", "renewBefore: 168h\n      renewSpread: 0s", ""},
		{"renewSpread", "renewBefore: 168h\n      renewSpread: 335h", ""},
	} {
		dir := copyRepo(t)
		edit(t, filepath.Join(dir, "configpub.yaml"), "validFor: 504h        # three weeks",
			"validFor: 504h        # three weeks\n      "+c.profile)
		_, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "prod", CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.profile, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "leaseProfiles.production."+c.field)):
			t.Errorf("%q: error %v, want one naming spec.leaseProfiles.production.%s and %q", c.profile, err, c.field, c.want)
		}
	}
}

// TestRenewDerivesTheCommittedReleaseOnlyWhenNothingIsDue: a renewal that
// re-issues anything is compiled on the committed release without deriving
// that release again — release N-1 is not read — and derives (the next
// compile checks it up to date). With nothing due, release N is derived
// instead, to tell an up-to-date release (left alone) from an edited one
// (written again as derived, as a compile without Renew does). After a
// source change a renewal writes what a compile writes, due or not. Each
// time one derivation (counted by Options.Keep, called once per target of
// every derivation), not two.
func TestRenewDerivesTheCommittedReleaseOnlyWhenNothingIsDue(t *testing.T) {
	ctx := context.Background()
	dir := copyRepo(t)
	h := newHistory(t, dir)
	r1 := h.compile(t, time.Time{})
	created, _ := bundle.ParseTime(r1.Manifest.CreatedAt)
	edit(t, filepath.Join(dir, "agents/account.yaml"), "requestsPerMinute: 120", "requestsPerMinute: 121")
	h.release(t, created.Add(10*24*time.Hour))
	var (
		reads    []int64 // the releases read from history
		compiled atomic.Int64
	)
	renew := func(at time.Time) *compiler.Result {
		t.Helper()
		reads = nil
		compiled.Store(0)
		lookup := func(ctx context.Context, env string, v int64) ([]byte, error) {
			reads = append(reads, v)
			return h.lookup(ctx, env, v)
		}
		count := func(*bundle.TargetEntry) bool { compiled.Add(1); return false }
		res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "dev", CreatedAt: at, Previous: lookup, Renew: true,
			ManifestOnly: true, Keep: count})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	targets := int64(len(r1.Manifest.Targets))

	quiet := created.Add(11 * 24 * time.Hour)
	if res := renew(quiet); !res.Unchanged() || res.Manifest.ReleaseVersion != 2 || res.Stale() != nil || fmt.Sprint(reads) != "[1]" || compiled.Load() != targets {
		t.Fatalf("renew with nothing due: release %d, unchanged %v, stale %v, read %v, %d targets compiled; want release 2 verified against release 1 (%d targets) and left alone",
			res.Manifest.ReleaseVersion, res.Unchanged(), res.Stale(), reads, compiled.Load(), targets)
	}

	_, end := r1.ActivationWindow() // release 1's windows end: its kept snapshots are due
	due, _ := bundle.ParseTime(end)
	r3 := renew(due)
	if r3.Manifest.ReleaseVersion != 3 || len(r3.Reissued) == 0 || len(reads) != 0 || compiled.Load() != targets {
		t.Fatalf("renew with %d due: release %d, read %v, %d targets compiled; want release 3 compiled (%d targets) on release 2 as committed, no release read",
			len(r3.Reissued), r3.Manifest.ReleaseVersion, reads, compiled.Load(), targets)
	}

	// Release 2 edited (a carried target's snapshotId, digests fixed to
	// match): with nothing due it is written again as derived.
	var c forgery.Case
	for _, fc := range forgery.Cases() {
		if fc.Name == "unchanged target snapshotId" {
			c = fc
		}
	}
	orig := h.releases[2]
	forged, err := forgery.Forge(c, orig)
	if err != nil || bytes.Equal(forged, orig) {
		t.Fatalf("forge release 2 (%q): %v", c.Name, err)
	}
	writeRelease := func(archive []byte) {
		t.Helper()
		if err := compiler.WriteReleaseFiles(ctx, dir, archive); err != nil {
			t.Fatal(err)
		}
	}
	writeRelease(forged)
	res := renew(quiet)
	if !bytes.Equal(res.ManifestBytes, orig) || res.Unchanged() || !errors.Is(res.Stale(), compiler.ErrStale) {
		t.Fatalf("renew with nothing due on an edited release 2: release %d, unchanged %v, stale %v; want release 2 as derived",
			res.Manifest.ReleaseVersion, res.Unchanged(), res.Stale())
	}
	writeRelease(orig)

	// With a source change a renewal is the compile after the change, due
	// or not: release 3 with the change, compiled once on release 2 as
	// committed (its inputs changed: release 1 is not read).
	agent := filepath.Join(dir, "agents/account.yaml")
	edit(t, agent, "requestsPerMinute: 121", "requestsPerMinute: 122")
	for name, at := range map[string]time.Time{"nothing due": quiet, "due": due} {
		res := renew(at)
		plain, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "dev", CreatedAt: at, Previous: h.lookup, ManifestOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Manifest.ReleaseVersion != 3 || !bytes.Equal(res.ManifestBytes, plain.ManifestBytes) || len(reads) != 0 || compiled.Load() != targets {
			t.Fatalf("renew after a source change, %s: release %d (the same as compile: %v), read %v, %d targets compiled; want release 3 as compile writes it, compiled once (%d targets), no release read",
				name, res.Manifest.ReleaseVersion, bytes.Equal(res.ManifestBytes, plain.ManifestBytes), reads, compiled.Load(), targets)
		}
	}
	edit(t, agent, "requestsPerMinute: 122", "requestsPerMinute: 121")

	if err := compiler.Write(ctx, r3, dir, ""); err != nil {
		t.Fatal(err)
	}
	h.releases[3] = r3.ManifestBytes
	chk, err := h.try(due.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !chk.UpToDate || chk.Manifest.ReleaseVersion != 3 {
		t.Fatalf("the renewal does not derive: release %d, %v", chk.Manifest.ReleaseVersion, chk.Stale())
	}
}
