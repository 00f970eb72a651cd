package bundle

import (
	"sort"
	"time"
)

// clockChangesFrom is the first year whose clock changes the elapsed-time
// check of a schedule reads. Windows are evaluated from now on, and a
// zone's earlier rules (summer time that a country has since abolished)
// would refuse what no window meets again. The check reads the 400 years
// from it: a zone's rule for the years after its table, such as "the last
// Sunday of March", repeats with the calendar.
const clockChangesFrom = 2026

// shortestAcrossClockChanges returns the shortest elapsed time, when it
// is at most within, between two consecutive openings of c in loc that
// have a change of the zone's offset between them (the second may open at
// the change). The schedule's other openings are as far apart in elapsed
// time as on the wall clock, which shortestPeriod measures; across a
// change the clock jumps, so a daily opening comes 23 hours after the one
// before on the day summer time starts in Europe/Berlin. A time the clock
// repeats opens twice, an hour apart, as Contains reads it; that pair is
// not a gap between two windows but one night's window an hour longer, so
// it is passed over. Openings are read as Contains
// reads them: an instant opens when the zone's clock reads a minute of
// the schedule. ok is false when no such gap is at most within, or loc
// never changes its offset.
//
// The cost is bounded: the zone's changes over 400 years (two a year for
// most zones with summer time, 800) times the days within `within` either
// side of each, a calendar walk without time zone lookups; tens of
// microseconds for Europe/Berlin, next to the wall clock's milliseconds.
func (c *cron) shortestAcrossClockChanges(loc *time.Location, within time.Duration) (p period, ok bool) {
	from := time.Date(clockChangesFrom, 1, 1, 0, 0, 0, 0, time.UTC)
	segs := offsetSegments(loc, from, from.AddDate(400, 0, 0))
	if len(segs) < 2 {
		return period{}, false
	}
	minutes := c.dayMinutes()
	for k := 1; k < len(segs); k++ {
		change := segs[k].start
		a, okA := c.lastOpeningBefore(segs, k, change.Add(-within), minutes)
		b, okB := c.firstOpeningFrom(segs, k, change.Add(within), minutes)
		if !okA || !okB {
			continue
		}
		if sameWallMinute(a.In(loc), b.In(loc)) {
			// The clock repeats this time: the window opens again
			// an hour later and that night's freeze lasts an hour
			// longer, but the windows before and after it are as
			// far apart as the wall clock says.
			continue
		}
		if g := b.Sub(a); g <= within && (!ok || g < p.gap) {
			p, ok = period{gap: g, from: a.In(loc), to: b.In(loc)}, true
		}
	}
	return p, ok
}

// sameWallMinute reports whether a and b read the same date and minute on
// their zone's clock: one opening of a time the clock repeats.
func sameWallMinute(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return ay == by && am == bm && ad == bd && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

// offsetSegment is a stretch of a zone's time with one offset from UTC,
// from start (zero: the beginning of time) to the next segment's start.
type offsetSegment struct {
	start time.Time
	off   time.Duration
}

// offsetSegments returns loc's offsets from the one in effect at from to
// the last that starts before until, in order; changes that keep the
// offset (only the zone's name changes) do not start a segment.
func offsetSegments(loc *time.Location, from, until time.Time) []offsetSegment {
	var segs []offsetSegment
	for t := from; ; {
		local := t.In(loc)
		start, end := local.ZoneBounds()
		_, off := local.Zone()
		if n := len(segs); n == 0 || segs[n-1].off != time.Duration(off)*time.Second {
			segs = append(segs, offsetSegment{start: start, off: time.Duration(off) * time.Second})
		}
		switch {
		case end.IsZero() || !end.Before(until):
			return segs
		case !end.After(t):
			// Past its table a zone's rule is computed a year at a
			// time, and Go's ZoneBounds ends the year's last stretch
			// a day early (at December 31 instead of January 1, with
			// the same offset): step over that day.
			t = t.Add(24 * time.Hour)
		default:
			t = end
		}
	}
}

// lastOpeningBefore returns the last instant before segs[k].start, and not
// before lo, at which c opens, reading each segment's clock.
func (c *cron) lastOpeningBefore(segs []offsetSegment, k int, lo time.Time, minutes []int) (time.Time, bool) {
	for i := k - 1; i >= 0; i-- {
		start, end := segs[i].start, segs[i+1].start
		if !end.After(lo) {
			return time.Time{}, false
		}
		if start.IsZero() || start.Before(lo) {
			start = lo
		}
		off := segs[i].off
		if w, ok := c.lastWallIn(start.UTC().Add(off), end.UTC().Add(off), minutes); ok {
			return w.Add(-off), true
		}
	}
	return time.Time{}, false
}

// firstOpeningFrom returns the first instant at or after segs[k].start,
// and before hi, at which c opens, reading each segment's clock.
func (c *cron) firstOpeningFrom(segs []offsetSegment, k int, hi time.Time, minutes []int) (time.Time, bool) {
	for i := k; i < len(segs); i++ {
		start, end := segs[i].start, hi
		if !start.Before(hi) {
			return time.Time{}, false
		}
		if i+1 < len(segs) && segs[i+1].start.Before(hi) {
			end = segs[i+1].start
		}
		off := segs[i].off
		if w, ok := c.firstWallIn(start.UTC().Add(off), end.UTC().Add(off), minutes); ok {
			return w.Add(-off), true
		}
	}
	return time.Time{}, false
}

// lastWallIn returns the latest wall-clock time in [lo, hi) at which c
// opens; wall-clock times are carried as UTC times with the clock's
// reading.
func (c *cron) lastWallIn(lo, hi time.Time, minutes []int) (time.Time, bool) {
	for day := hi.Add(-time.Nanosecond).Truncate(24 * time.Hour); day.Add(24 * time.Hour).After(lo); day = day.Add(-24 * time.Hour) {
		if !c.dayOpens(day) {
			continue
		}
		// The last minute m with day+m < hi.
		n := int((hi.Sub(day) - time.Nanosecond) / time.Minute)
		if i := sort.SearchInts(minutes, n+1) - 1; i >= 0 {
			if w := day.Add(time.Duration(minutes[i]) * time.Minute); !w.Before(lo) {
				return w, true
			}
		}
	}
	return time.Time{}, false
}

// firstWallIn returns the earliest wall-clock time in [lo, hi) at which c
// opens.
func (c *cron) firstWallIn(lo, hi time.Time, minutes []int) (time.Time, bool) {
	for day := lo.Truncate(24 * time.Hour); day.Before(hi); day = day.Add(24 * time.Hour) {
		if !c.dayOpens(day) {
			continue
		}
		// The first minute m with day+m >= lo.
		n := 0
		if lo.After(day) {
			n = int((lo.Sub(day) + time.Minute - time.Nanosecond) / time.Minute)
		}
		if i := sort.SearchInts(minutes, n); i < len(minutes) {
			if w := day.Add(time.Duration(minutes[i]) * time.Minute); w.Before(hi) {
				return w, true
			}
		}
	}
	return time.Time{}, false
}

// dayOpens reports whether c opens on the date of day.
func (c *cron) dayOpens(day time.Time) bool {
	return c.month&(1<<uint(day.Month())) != 0 && c.dayMatches(day.Day(), day.Weekday())
}
