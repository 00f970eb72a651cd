package compiler_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

// TestFreezeWindowSchedulesThatMisleadAreRefused compiles an Environment
// whose freeze window's schedule never opens (April 31, February 30), and
// one whose window stays open as long as the time between two openings
// (an hourly window open an hour: frozen for good; a midnight window in
// Europe/Berlin open 23h30m, which runs into the next on the day summer
// time starts, 23 hours long). Each is refused at the Environment's spec,
// naming the window, the schedule and (for the second) the duration and
// the period; nothing is compiled. All were accepted: the first froze
// nothing, the second froze every release for good.
func TestFreezeWindowSchedulesThatMisleadAreRefused(t *testing.T) {
	opts := compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, tc := range []struct{ window, want string }{
		{`{name: april-31, schedule: "0 0 31 4 *", duration: 1h}`,
			`environments/dev.yaml:5: spec: freezeWindows[0] (april-31): schedule "0 0 31 4 *" never opens: ` +
				`no date of the calendar matches its day-of-month, month and day-of-week`},
		{`{name: february-30, schedule: "0 0 30 2 *", duration: 1h}`,
			`environments/dev.yaml:5: spec: freezeWindows[0] (february-30): schedule "0 0 30 2 *" never opens: ` +
				`no date of the calendar matches its day-of-month, month and day-of-week`},
		{`{name: hourly, schedule: "0 * * * *", duration: 1h}`,
			`environments/dev.yaml:5: spec: freezeWindows[0] (hourly): duration "1h" is not shorter than the 1h between two openings ` +
				`of schedule "0 * * * *" (Jan 1 00:00 to Jan 1 01:00 on its clock): the next window would open before this one has closed, ` +
				`and windows that overlap freeze without a break (for good when every gap is that short); ` +
				`give a shorter duration, or a date range (from, until) for a longer freeze`},
		{`{name: nightly, schedule: "0 0 * * *", duration: 23h30m, timeZone: Europe/Berlin}`,
			`environments/dev.yaml:5: spec: freezeWindows[0] (nightly): duration "23h30m" is not shorter than the 23h of elapsed time ` +
				`between two openings of schedule "0 0 * * *" across a clock change in Europe/Berlin ` +
				`(Mar 29 2026 00:00 CET to Mar 30 2026 00:00 CEST): the next window would open before this one has closed, ` +
				`and windows that overlap freeze without a break; ` +
				`give a shorter duration, or a date range (from, until) for a longer freeze`},
	} {
		dir := copyRepo(t)
		edit(t, filepath.Join(dir, "environments/dev.yaml"), "spec:\n  settings:\n", "spec:\n  freezeWindows: ["+tc.window+"]\n  settings:\n")
		res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
		if !errors.Is(err, compiler.ErrInvalidSource) || err.Error() != tc.want {
			t.Errorf("got %v, %v\nwant %s", res, err, tc.want)
		}
	}
	// A weekly window shorter than the week compiles, with the window.
	dir := copyRepo(t)
	edit(t, filepath.Join(dir, "environments/dev.yaml"), "spec:\n  settings:\n",
		"spec:\n  freezeWindows: [{name: weekend, schedule: \"0 18 * * 5\", duration: 62h}]\n  settings:\n")
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil || len(res.Rollout.FreezeWindows) != 1 {
		t.Fatalf("weekend window: %v", err)
	}
}
