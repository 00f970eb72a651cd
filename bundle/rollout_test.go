package bundle

import (
	"strings"
	"testing"
	"time"
)

// TestFreezeWindowsOverSimulatedMonths walks a simulated half year in
// 15-minute steps and compares every answer with an independent oracle: a
// weekly window from Friday 18:00 UTC to Monday 08:00 UTC, a year-end date
// range, and a monthly first-day window.
func TestFreezeWindowsOverSimulatedMonths(t *testing.T) {
	r := Rollout{FreezeWindows: []FreezeWindow{
		{Name: "weekend", Schedule: "0 18 * * 5", Duration: "62h"},
		{Name: "year-end", From: "2026-12-20T00:00:00Z", Until: "2027-01-04T00:00:00Z"},
		{Name: "month-close", Schedule: "0 0 1 * *", Duration: "6h"},
	}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	oracle := func(t time.Time) string {
		wd, h := t.Weekday(), t.Hour()
		if wd == time.Friday && h >= 18 || wd == time.Saturday || wd == time.Sunday || wd == time.Monday && h < 8 {
			return "weekend"
		}
		if !t.Before(time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC)) && t.Before(time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC)) {
			return "year-end"
		}
		if t.Day() == 1 && h < 6 {
			return "month-close"
		}
		return ""
	}
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 6, 0)
	frozen, open := 0, 0
	for now := start; now.Before(end); now = now.Add(15 * time.Minute) {
		got := ""
		if w := r.FrozenAt(now); w != nil {
			got = w.Name
		}
		if want := oracle(now); got != want {
			t.Fatalf("%s (%s): frozen by %q, want %q", now.Format(time.RFC3339), now.Weekday(), got, want)
		}
		if got == "" {
			open++
		} else {
			frozen++
		}
	}
	if frozen == 0 || open == 0 {
		t.Fatalf("degenerate walk: %d frozen, %d open", frozen, open)
	}
	// Edges: the weekend window opens exactly at 18:00 and closes at 08:00.
	fri := time.Date(2026, 11, 6, 18, 0, 0, 0, time.UTC)
	if r.FrozenAt(fri.Add(-time.Second)) != nil || r.FrozenAt(fri) == nil {
		t.Error("weekend window does not open exactly at Friday 18:00")
	}
	mon := fri.Add(62 * time.Hour)
	if r.FrozenAt(mon.Add(-time.Second)) == nil || r.FrozenAt(mon) != nil {
		t.Error("weekend window does not close exactly after 62h")
	}
}

// TestFreezeWindowInATimeZoneOverAYear walks 2027 in 30-minute steps: a
// weekend window opening Friday 18:00 Europe/Berlin for 62 hours opens at
// 18:00 on Berlin's wall clock in winter and in summer (the oracle computes
// each Friday's opening with the time package in that zone), while the
// same schedule in UTC opens at 19:00 or 20:00 Berlin time, an hour apart
// across each clock change. It also checks the days a clock change skips
// or repeats the opening's local time.
func TestFreezeWindowInATimeZoneOverAYear(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	local := FreezeWindow{Name: "weekend", Schedule: "0 18 * * 5", Duration: "62h", TimeZone: "Europe/Berlin"}
	utc := FreezeWindow{Name: "weekend", Schedule: "0 18 * * 5", Duration: "62h"}
	if err := (&Rollout{FreezeWindows: []FreezeWindow{local}}).Validate(); err != nil {
		t.Fatal(err)
	}
	oracle := func(at time.Time) bool {
		l := at.In(berlin)
		// The Friday on or before l (its 18:00 opening may be up to 62 h back).
		for back := 0; back < 4; back++ {
			day := time.Date(l.Year(), l.Month(), l.Day()-back, 18, 0, 0, 0, berlin)
			if day.Weekday() == time.Friday && !at.Before(day) && at.Before(day.Add(62*time.Hour)) {
				return true
			}
		}
		return false
	}
	start := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	differ := 0
	for now := start; now.Before(start.AddDate(1, 0, 0)); now = now.Add(30 * time.Minute) {
		got, want := local.Contains(now), oracle(now)
		if got != want {
			t.Fatalf("%s (Berlin %s): frozen %v, want %v", now.Format(time.RFC3339), now.In(berlin).Format("Mon 15:04 MST"), got, want)
		}
		if got != utc.Contains(now) {
			differ++
		}
	}
	// The UTC schedule is 1 h (winter) or 2 h (summer) late in Berlin, at
	// the opening and at the close: 4 or 8 half-hours a week differ.
	if differ < 52*4 {
		t.Errorf("the Berlin and UTC schedules differ in %d half-hours of the year, want at least %d", differ, 52*4)
	}
	for _, tc := range []struct {
		name      string
		open, not []string // RFC 3339 instants inside and outside
	}{
		// 2027-03-26 is the Friday before summer time (CEST from 2027-03-28):
		// it opens at 17:00Z, the next at 16:00Z.
		{"opens at 18:00 CET", []string{"2027-03-26T17:00:00Z"}, []string{"2027-03-26T16:59:00Z"}},
		{"opens at 18:00 CEST", []string{"2027-04-02T16:00:00Z"}, []string{"2027-04-02T15:59:00Z"}},
		// 62 hours of elapsed time: across the change it closes at 09:00
		// on Monday's wall clock (CEST), an hour later than in winter.
		{"closes after 62 h across the change", []string{"2027-03-29T06:59:00Z"}, []string{"2027-03-29T07:00:00Z"}},
	} {
		for _, at := range tc.open {
			if !local.Contains(mustTime(t, at)) {
				t.Errorf("%s: not frozen at %s", tc.name, at)
			}
		}
		for _, at := range tc.not {
			if local.Contains(mustTime(t, at)) {
				t.Errorf("%s: frozen at %s", tc.name, at)
			}
		}
	}
	// 02:30 does not occur on 2027-03-28 in Berlin (02:00 CET becomes 03:00
	// CEST) and occurs twice on 2027-10-31 (03:00 CEST becomes 02:00 CET).
	night := FreezeWindow{Name: "night", Schedule: "30 2 * * *", Duration: "10m", TimeZone: "Europe/Berlin"}
	opens := func(day time.Time) int {
		n := 0
		for m := day; m.Before(day.Add(24 * time.Hour)); m = m.Add(time.Minute) {
			if night.Contains(m) && !night.Contains(m.Add(-time.Minute)) {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		day  string
		want int
	}{{"2027-03-27T22:00:00Z", 0}, {"2027-03-28T22:00:00Z", 1}, {"2027-10-30T22:00:00Z", 2}, {"2027-10-31T23:00:00Z", 1}} {
		if got := opens(mustTime(t, tc.day)); got != tc.want {
			t.Errorf("02:30 Berlin in the day from %s: opens %d times, want %d", tc.day, got, tc.want)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestRolloutValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		r    Rollout
		want string
	}{
		{Rollout{Activation: "three-phase"}, `activation "three-phase"`},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", Schedule: "0 18 * *", Duration: "1h"}}}, "five fields"},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", Schedule: "61 18 * * *", Duration: "1h"}}}, "minute"},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", Schedule: "0 18 * * *", Duration: "800h"}}}, "duration"},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", From: "2027-01-02T00:00:00Z", Until: "2027-01-01T00:00:00Z"}}}, "not before"},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", From: "2027-01-01T00:00:00Z", Until: "2027-01-02T00:00:00Z", Schedule: "* * * * *"}}}, "not both"},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", From: "a", Until: "b"}, {Name: "x"}}}, "RFC 3339"},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", Schedule: "0 18 * * 5", Duration: "1h", TimeZone: "Europe/Atlantis"}}}, `timeZone "Europe/Atlantis": not a time zone`},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", Schedule: "0 18 * * 5", Duration: "1h", TimeZone: "Local"}}}, `timeZone "Local": name a zone`},
		{Rollout{FreezeWindows: []FreezeWindow{{Name: "x", From: "2027-01-01T00:00:00Z", Until: "2027-01-02T00:00:00Z", TimeZone: "UTC"}}}, "only for a schedule"},
		{Rollout{HealthGate: &HealthGate{Soak: "0s", Rejections: 1}}, "healthGate.soak"},
		{Rollout{HealthGate: &HealthGate{Soak: "1m"}}, "rejections or missingAcks"},
	} {
		err := tc.r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.r, err, tc.want)
		}
	}
}

// TestCronDayRuleIsVixieCrons walks two simulated years a day at a time
// and compares, at each day's opening time, whether a window opens with an
// oracle of the day rule of Vixie/ISC cron (crontab(5)): when both day
// fields are restricted a day matches if either does; a day field that
// starts with * — including */N — is unrestricted for that rule, so the
// other field must match as well as the */N. (robfig/cron v3 instead
// counts */N with N > 1 as restricted.)
func TestCronDayRuleIsVixieCrons(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		oracle   func(d time.Time) bool
	}{
		{"0 12 */2 * 1", func(d time.Time) bool { return d.Day()%2 == 1 && d.Weekday() == time.Monday }},
		{"0 12 1-7 * */2", func(d time.Time) bool { return d.Day() <= 7 && d.Weekday()%2 == 0 }},
		{"0 12 *,15 * 5", func(d time.Time) bool { return d.Weekday() == time.Friday }},
		{"0 12 1,15 * 5", func(d time.Time) bool { return d.Day() == 1 || d.Day() == 15 || d.Weekday() == time.Friday }},
		{"0 12 * * 5", func(d time.Time) bool { return d.Weekday() == time.Friday }},
		{"0 12 */2 * *", func(d time.Time) bool { return d.Day()%2 == 1 }},
		{"0 12 * * 7", func(d time.Time) bool { return d.Weekday() == time.Sunday }},
	} {
		w := FreezeWindow{Name: "x", Schedule: tc.schedule, Duration: "1m"}
		if err := w.validate(); err != nil {
			t.Fatalf("%s: %v", tc.schedule, err)
		}
		opened := 0
		for d := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC); d.Year() < 2029; d = d.AddDate(0, 0, 1) {
			if got, want := w.Contains(d), tc.oracle(d); got != want {
				t.Fatalf("%s on %s (%s): open %v, want %v", tc.schedule, d.Format("2006-01-02"), d.Weekday(), got, want)
			}
			if w.Contains(d) {
				opened++
			}
		}
		if opened == 0 {
			t.Fatalf("%s: never opened in two years", tc.schedule)
		}
	}
}

// TestScheduleThatNeverOpensIsRefused: a schedule whose day-of-month no
// month it names has never opens; it is refused naming the schedule (the
// compiler adds the window), where it used to be accepted and freeze
// nothing. February 29 opens in leap years and is accepted.
func TestScheduleThatNeverOpensIsRefused(t *testing.T) {
	// */7 in day-of-week is Sunday alone but counts as *: the day must
	// be February 30 and a Sunday.
	for _, s := range []string{"0 0 31 4 *", "0 0 30 2 *", "0 0 31 2,4,6,9,11 *", "0 0 30-31 2 *", "0 0 31 4 */2", "0 0 30 2 */7"} {
		r := Rollout{FreezeWindows: []FreezeWindow{{Name: "never", Schedule: s, Duration: "1h"}}}
		err := r.Validate()
		want := `freezeWindows[0] (never): schedule "` + s + `" never opens: no date of the calendar matches its day-of-month, month and day-of-week`
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", s, err, want)
		}
	}
	// Both day fields restricted: February 30 or a Friday.
	for _, s := range []string{"0 0 29 2 *", "0 0 31 * *", "0 0 31 4 1", "0 0 30 2 5"} {
		r := Rollout{FreezeWindows: []FreezeWindow{{Name: "x", Schedule: s, Duration: "1h"}}}
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestDurationOfAPeriodOrMoreIsRefused: a window that stays open as long
// as the shortest time between two openings of its schedule, or longer,
// opens again before it has closed (an hourly schedule open for an hour is
// frozen for good). It is refused naming the duration, the period and the
// schedule; a minute less is accepted.
func TestDurationOfAPeriodOrMoreIsRefused(t *testing.T) {
	for _, tc := range []struct {
		schedule, refused, accepted, period, between string
	}{
		{"0 * * * *", "1h", "59m", "1h", "Jan 1 00:00 to Jan 1 01:00"},
		{"*/15 * * * *", "15m", "14m", "15m", "Jan 1 00:00 to Jan 1 00:15"},
		{"0 9,17 * * *", "8h", "7h59m", "8h", "Jan 1 09:00 to Jan 1 17:00"},
		{"0 0 */2 * *", "24h", "23h59m", "24h", "Jan 31 00:00 to Feb 1 00:00"},
		{"0 18 * * 5", "168h", "167h59m", "168h (7 days)", "Jan 7 18:00 to Jan 14 18:00"},
		{"0 0 1 * *", "672h", "671h", "672h (28 days)", "Feb 1 00:00 to Mar 1 00:00"},
		{"30 6 * * 1-5", "24h", "23h", "24h", "Jan 3 06:30 to Jan 4 06:30"},
	} {
		r := Rollout{FreezeWindows: []FreezeWindow{{Name: "w", Schedule: tc.schedule, Duration: tc.refused}}}
		err := r.Validate()
		want := `freezeWindows[0] (w): duration "` + tc.refused + `" is not shorter than the ` + tc.period +
			` between two openings of schedule "` + tc.schedule + `" (` + tc.between + ` on its clock): the next window would open ` +
			`before this one has closed, and windows that overlap freeze without a break (for good when every gap is that short); ` +
			`give a shorter duration, or a date range (from, until) for a longer freeze`
		if err == nil || err.Error() != want {
			t.Errorf("%s for %s:\ngot  %v\nwant %s", tc.schedule, tc.refused, err, want)
		}
		r.FreezeWindows[0].Duration = tc.accepted
		if err := r.Validate(); err != nil {
			t.Errorf("%s for %s: %v", tc.schedule, tc.accepted, err)
		}
	}
}
