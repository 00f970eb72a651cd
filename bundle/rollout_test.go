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
		{Rollout{HealthGate: &HealthGate{Soak: "0s", Rejections: 1}}, "healthGate.soak"},
		{Rollout{HealthGate: &HealthGate{Soak: "1m"}}, "rejections or missingAcks"},
	} {
		err := tc.r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.r, err, tc.want)
		}
	}
}
