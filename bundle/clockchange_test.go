package bundle

import (
	"testing"
	"time"

	"github.com/configpub/configpub/internal/simclock"
)

func loadZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	return loc
}

// TestDurationAcrossAClockChangeIsRefused: the shortest gap between two
// openings of a schedule is measured in elapsed time, across the zone's
// clock changes, not on the wall clock. A daily window at midnight in
// Europe/Berlin open 23h30m was accepted (the wall clock's gap is 24h) but
// the day summer time starts has 23 hours, so that night's window opened
// before the one before had closed and the two froze without a break. It
// is refused now naming the gap, the zone and the two openings; the same
// schedule in UTC, and in a zone without summer time, is accepted as
// before, and a minute under the elapsed gap is accepted in the zone.
func TestDurationAcrossAClockChangeIsRefused(t *testing.T) {
	loadZone(t, "Europe/Berlin")
	for _, tc := range []struct {
		schedule, zone, refused, accepted, gap, between string
	}{
		// 2026-03-29 02:00 CET becomes 03:00 CEST: 23 hours from midnight to midnight.
		{"0 0 * * *", "Europe/Berlin", "23h30m", "22h59m", "23h", "Mar 29 2026 00:00 CET to Mar 30 2026 00:00 CEST"},
		{"0 0 * * *", "America/New_York", "23h30m", "22h59m", "23h", "Mar 8 2026 00:00 EST to Mar 9 2026 00:00 EDT"},
		// Lord Howe Island moves its clock by 30 minutes.
		{"0 0 * * *", "Australia/Lord_Howe", "23h30m", "23h29m", "23h30m", "Oct 4 2026 00:00 +1030 to Oct 5 2026 00:00 +11"},
		// 01:00 CET and 03:00 CEST, an hour apart on the night the clock skips 02:00.
		{"0 1,3 * * *", "Europe/Berlin", "1h", "59m", "1h", "Mar 29 2026 01:00 CET to Mar 29 2026 03:00 CEST"},
		{"0 18 * * 5", "Europe/Berlin", "167h", "166h59m", "167h", "Mar 27 2026 18:00 CET to Apr 3 2026 18:00 CEST"},
	} {
		r := Rollout{FreezeWindows: []FreezeWindow{{Name: "w", Schedule: tc.schedule, Duration: tc.refused, TimeZone: tc.zone}}}
		err := r.Validate()
		want := `freezeWindows[0] (w): duration "` + tc.refused + `" is not shorter than the ` + tc.gap +
			` of elapsed time between two openings of schedule "` + tc.schedule + `" across a clock change in ` + tc.zone +
			` (` + tc.between + `): the next window would open before this one has closed, and windows that overlap freeze ` +
			`without a break; give a shorter duration, or a date range (from, until) for a longer freeze`
		if err == nil || err.Error() != want {
			t.Errorf("%s for %s in %s:\ngot  %v\nwant %s", tc.schedule, tc.refused, tc.zone, err, want)
		}
		r.FreezeWindows[0].Duration = tc.accepted
		if err := r.Validate(); err != nil {
			t.Errorf("%s for %s in %s: %v", tc.schedule, tc.accepted, tc.zone, err)
		}
	}
	// 02:30 occurs twice the night the clock goes back (03:00 CEST becomes
	// 02:00 CET): Contains opens the window at both, so that night's
	// freeze lasts an hour longer, but the two are one window, not two
	// that run together. Before the repeat was passed over, every
	// duration of an hour or more was refused for this common schedule.
	for _, d := range []string{"1h", "2h", "23h59m"} {
		r := Rollout{FreezeWindows: []FreezeWindow{{Name: "w", Schedule: "30 2 * * *", Duration: d, TimeZone: "Europe/Berlin"}}}
		if err := r.Validate(); err != nil {
			t.Errorf("30 2 * * * for %s in Europe/Berlin: %v", d, err)
		}
	}
	// Without clock changes the wall clock's gap is the elapsed one.
	for _, zone := range []string{"", "UTC", "Asia/Tokyo", "Etc/GMT-5"} {
		for _, s := range []struct{ schedule, duration string }{{"0 0 * * *", "23h59m"}, {"30 2 * * *", "23h59m"}, {"0 1,3 * * *", "1h59m"}} {
			r := Rollout{FreezeWindows: []FreezeWindow{{Name: "w", Schedule: s.schedule, Duration: s.duration, TimeZone: zone}}}
			if err := r.Validate(); err != nil {
				t.Errorf("%s for %s in %q: %v", s.schedule, s.duration, zone, err)
			}
		}
	}
}

// TestClockChangeGapMatchesContains checks the elapsed-time gap against an
// independent oracle: for each clock change of 2026 and 2027 in three
// zones, it walks the instants around the change minute by minute, finds
// where Contains's reading of the schedule opens, and takes the shortest
// gap between two consecutive openings. The longest duration Validate
// accepts must be a minute under the shorter of that and the wall clock's
// gap.
func TestClockChangeGapMatchesContains(t *testing.T) {
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe"} {
		loc := loadZone(t, zone)
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		segs := offsetSegments(loc, from, from.AddDate(2, 0, 0))
		if len(segs) < 4 {
			t.Fatalf("%s: %d offsets in 2026 and 2027, want at least 4", zone, len(segs))
		}
		for _, schedule := range []string{"0 0 * * *", "30 2 * * *", "0 1,3 * * *", "15 */2 * * *", "0 18 * * 5", "45 1 * * 0"} {
			c, err := parseCron(schedule)
			if err != nil {
				t.Fatal(err)
			}
			wall, _ := c.shortestPeriod()
			shortest := wall.gap
			for _, seg := range segs[1:] {
				var last time.Time
				for m := seg.start.Add(-8 * 24 * time.Hour); m.Before(seg.start.Add(8 * 24 * time.Hour)); m = m.Add(time.Minute) {
					if !c.matches(m.In(loc)) {
						continue
					}
					if !last.IsZero() && m.Sub(last) < shortest && !sameWallMinute(m.In(loc), last.In(loc)) {
						shortest = m.Sub(last)
					}
					last = m
				}
			}
			w := FreezeWindow{Name: "w", Schedule: schedule, TimeZone: zone, Duration: (shortest - time.Minute).String()}
			if err := w.validate(); err != nil {
				t.Errorf("%s in %s for %s (a minute under the oracle's %s): %v", schedule, zone, w.Duration, shortest, err)
			}
			w.Duration = shortest.String()
			if err := w.validate(); err == nil {
				t.Errorf("%s in %s for %s (the oracle's gap): accepted", schedule, zone, w.Duration)
			}
		}
	}
}

// TestWindowsRunTogetherAcrossSpringForward walks the simulated days
// around the start of summer time 2027 in Europe/Berlin minute by minute:
// a midnight window open 23h30m (what Validate now refuses) is frozen
// without a break for 46h30m, from the opening on Sunday (a day of 23
// hours) to the close of Monday's window, while the longest accepted
// duration, 22h59m, leaves at least a minute open between two windows,
// and 23h30m in UTC leaves half an hour every day.
func TestWindowsRunTogetherAcrossSpringForward(t *testing.T) {
	loadZone(t, "Europe/Berlin")
	start := time.Date(2027, 3, 26, 23, 0, 0, 0, time.UTC) // Saturday 00:00 CET
	end := time.Date(2027, 3, 29, 22, 0, 0, 0, time.UTC)   // Tuesday 00:00 CEST
	open := func(w FreezeWindow) (breaks int, longest time.Duration) {
		clock := simclock.New(start)
		var since time.Time
		for ; clock.Now().Before(end); clock.Advance(time.Minute) {
			now := clock.Now()
			if w.Contains(now) {
				if since.IsZero() {
					since = now
				}
				longest = max(longest, now.Add(time.Minute).Sub(since))
				continue
			}
			if !since.IsZero() {
				breaks++
			}
			since = time.Time{}
		}
		return breaks, longest
	}
	refused := FreezeWindow{Name: "night", Schedule: "0 0 * * *", Duration: "23h30m", TimeZone: "Europe/Berlin"}
	if err := refused.validate(); err == nil {
		t.Error("23h30m at midnight in Europe/Berlin: accepted")
	}
	if breaks, longest := open(refused); longest != 46*time.Hour+30*time.Minute {
		t.Errorf("23h30m in Europe/Berlin: %d breaks, longest freeze %s; want the windows of March 28 and 29 to run together", breaks, longest)
	}
	accepted := FreezeWindow{Name: "night", Schedule: "0 0 * * *", Duration: "22h59m", TimeZone: "Europe/Berlin"}
	if err := accepted.validate(); err != nil {
		t.Fatal(err)
	}
	if breaks, longest := open(accepted); breaks != 3 || longest != 22*time.Hour+59*time.Minute {
		t.Errorf("22h59m in Europe/Berlin: %d breaks, longest freeze %s; want 3 and 22h59m", breaks, longest)
	}
	utc := FreezeWindow{Name: "night", Schedule: "0 0 * * *", Duration: "23h30m"}
	if err := utc.validate(); err != nil {
		t.Fatal(err)
	}
	if breaks, longest := open(utc); breaks != 3 || longest != 23*time.Hour+30*time.Minute {
		t.Errorf("23h30m in UTC: %d breaks, longest freeze %s; want 3 and 23h30m", breaks, longest)
	}
}

// BenchmarkValidateScheduleInAZone measures the check of one scheduled
// window in a zone with summer time: the wall clock's 400-year cycle and
// the zone's clock changes over 400 years.
func BenchmarkValidateScheduleInAZone(b *testing.B) {
	w := FreezeWindow{Name: "weekend", Schedule: "0 18 * * 5", Duration: "62h", TimeZone: "Europe/Berlin"}
	for b.Loop() {
		if err := w.validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOffsetSegmentsOver400Years: the zone's offsets the check reads,
// from ZoneBounds, agree with the time package's offset at every day's
// noon and every change's minute over the 400 years, past the zone's
// table too (where Go computes the rule a year at a time and ended a
// year's last stretch a day early, which stopped the walk in 2040).
func TestOffsetSegmentsOver400Years(t *testing.T) {
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Tokyo"} {
		loc := loadZone(t, zone)
		from := time.Date(clockChangesFrom, 1, 1, 0, 0, 0, 0, time.UTC)
		until := from.AddDate(400, 0, 0)
		segs := offsetSegments(loc, from, until)
		offsetAt := func(at time.Time) time.Duration {
			_, off := at.In(loc).Zone()
			return time.Duration(off) * time.Second
		}
		for i, seg := range segs[1:] {
			if offsetAt(seg.start) != seg.off || offsetAt(seg.start.Add(-time.Second)) != segs[i].off {
				t.Fatalf("%s: change at %s: offsets %s to %s, the time package reads %s to %s",
					zone, seg.start, segs[i].off, seg.off, offsetAt(seg.start.Add(-time.Second)), offsetAt(seg.start))
			}
		}
		k := 0
		for day := from.Add(12 * time.Hour); day.Before(until); day = day.Add(24 * time.Hour) {
			for k+1 < len(segs) && !day.Before(segs[k+1].start) {
				k++
			}
			if got := offsetAt(day); got != segs[k].off {
				t.Fatalf("%s: %s: offset %s, the segments say %s", zone, day, got, segs[k].off)
			}
		}
		t.Logf("%s: %d offsets over 400 years", zone, len(segs))
	}
}
