package bundle

import (
	"testing"
	"time"
)

// FuzzFreezeWindow: whatever an Environment's freeze window says (a date
// range or a cron schedule, a duration and a time zone), Validate answers
// within a second, and a window it refuses for its fields contains no
// moment (Contains never reads half of a window: the date range of one
// that also has a schedule, a range with a zone, a 30 s duration); a
// window it accepts is described without a panic.
func FuzzFreezeWindow(f *testing.F) {
	for _, w := range []FreezeWindow{
		{Schedule: "0 18 * * 5", Duration: "62h"},
		{Schedule: "0 18 * * 5", Duration: "62h", TimeZone: "Europe/Berlin"},
		{Schedule: "*/15 9-17 1,15 * 1-5", Duration: "10m"},
		{Schedule: "0 0 31 4 *", Duration: "1h"},
		{Schedule: "0 0 29 2 *", Duration: "744h"},
		{Schedule: "0 * * * *", Duration: "59m"},
		{Schedule: "0 18 * * 7", Duration: "1m", TimeZone: "UTC"},
		{Schedule: "0 18 * *", Duration: "1h"},
		{Schedule: "0 18 * * 5", Duration: "30s"},
		{From: "2026-12-24T00:00:00Z", Until: "2027-01-02T00:00:00Z"},
		{From: "2026-12-24T00:00:00+01:00", Until: "2026-12-24T00:00:00Z"},
	} {
		f.Add(w.From, w.Until, w.Schedule, w.Duration, w.TimeZone)
	}
	probes := []time.Time{
		time.Date(2026, 12, 25, 19, 0, 0, 0, time.UTC), // a Friday, inside the year-end range
		time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2027, 1, 8, 18, 30, 0, 0, time.UTC), // a Friday evening
		time.Date(2027, 3, 28, 1, 30, 0, 0, time.UTC), // Europe's clock change
	}
	f.Fuzz(func(t *testing.T, from, until, schedule, duration, zone string) {
		w := FreezeWindow{Name: "w", From: from, Until: until, Schedule: schedule, Duration: duration, TimeZone: zone}
		start := time.Now()
		err := (&Rollout{FreezeWindows: []FreezeWindow{w}}).Validate()
		if d := time.Since(start); d > time.Second {
			t.Fatalf("%+v: Validate took %s", w, d)
		}
		if err == nil {
			_ = w.Describe()
			return
		}
		if _, perr := w.parse(); perr == nil {
			return // refused after the calendar walk: read as written
		}
		for _, p := range probes {
			if w.Contains(p) {
				t.Fatalf("%+v: refused (%v) but contains %s", w, err, p)
			}
		}
	})
}
