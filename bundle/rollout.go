package bundle

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Activation modes of an environment (Environment spec.activation).
const (
	// ActivationDirect moves every pointer as soon as the release is
	// activated (the default).
	ActivationDirect = "direct"
	// ActivationTwoPhase requires every moving target's runtime to report
	// READY for the staged candidate snapshot before any pointer moves.
	ActivationTwoPhase = "two-phase"
)

// MaxScheduledFreeze bounds the duration of a scheduled freeze window.
const MaxScheduledFreeze = 31 * 24 * time.Hour

// Rollout is an environment's rollout policy, as compiled from its
// Environment document: the activation mode, the freeze windows and the
// health gate. The zero value is direct activation with neither.
type Rollout struct {
	Activation    string         `json:"activation,omitempty"`
	FreezeWindows []FreezeWindow `json:"freezeWindows,omitempty"`
	HealthGate    *HealthGate    `json:"healthGate,omitempty"`
}

// FreezeWindow is a period in which promote and activate are refused
// unless broken with a reason. It is either a date range (From, Until:
// RFC 3339, Until exclusive) or a schedule: a five-field cron expression
// (minute hour day-of-month month day-of-week) at which the window opens,
// read in TimeZone (an IANA name such as Europe/Berlin; UTC when empty),
// and the Duration it stays open. In a zone with daylight saving time the
// window opens at the same wall-clock time all year; a local time that a
// clock change skips does not occur that day, and one it repeats occurs
// twice.
type FreezeWindow struct {
	Name     string `json:"name"`
	From     string `json:"from,omitempty"`
	Until    string `json:"until,omitempty"`
	Schedule string `json:"schedule,omitempty"`
	Duration string `json:"duration,omitempty"`
	TimeZone string `json:"timeZone,omitempty"`
}

// HealthGate watches an environment for Soak after each activation and
// rolls it back to the previous release when at least Rejections distinct
// targets rejected the activated snapshots, or when, at the end of the
// soak, at least MissingAcks moved targets have not acknowledged theirs. A
// threshold of 0 is not checked.
type HealthGate struct {
	Soak        string `json:"soak"`
	Rejections  int    `json:"rejections,omitempty"`
	MissingAcks int    `json:"missingAcks,omitempty"`
}

// TwoPhase reports whether the policy requires two-phase activation.
func (r *Rollout) TwoPhase() bool { return r != nil && r.Activation == ActivationTwoPhase }

// IsZero reports whether the policy is the default one.
func (r *Rollout) IsZero() bool {
	return r == nil || (r.Activation == "" || r.Activation == ActivationDirect) && len(r.FreezeWindows) == 0 && r.HealthGate == nil
}

// Validate checks the policy, naming the first field that is wrong.
func (r *Rollout) Validate() error {
	if r == nil {
		return nil
	}
	switch r.Activation {
	case "", ActivationDirect, ActivationTwoPhase:
	default:
		return fmt.Errorf("activation %q: want %s or %s", r.Activation, ActivationDirect, ActivationTwoPhase)
	}
	seen := map[string]bool{}
	for i, w := range r.FreezeWindows {
		if w.Name == "" {
			return fmt.Errorf("freezeWindows[%d].name: empty", i)
		}
		if seen[w.Name] {
			return fmt.Errorf("freezeWindows[%d].name %q: used twice", i, w.Name)
		}
		seen[w.Name] = true
		if err := w.validate(); err != nil {
			return fmt.Errorf("freezeWindows[%d] (%s): %w", i, w.Name, err)
		}
	}
	if g := r.HealthGate; g != nil {
		d, err := time.ParseDuration(g.Soak)
		if err != nil || d <= 0 {
			return fmt.Errorf("healthGate.soak %q: want a positive duration such as 10m", g.Soak)
		}
		if g.Rejections < 0 || g.MissingAcks < 0 {
			return fmt.Errorf("healthGate: thresholds must not be negative")
		}
		if g.Rejections == 0 && g.MissingAcks == 0 {
			return fmt.Errorf("healthGate: set rejections or missingAcks (or both)")
		}
	}
	return nil
}

// SoakDuration returns the health gate's soak window (0 without a gate).
func (g *HealthGate) SoakDuration() time.Duration {
	if g == nil {
		return 0
	}
	d, _ := time.ParseDuration(g.Soak)
	return d
}

// openings is a window as Contains reads it: a date range [from, until),
// or a schedule c read in loc whose openings each last d.
type openings struct {
	from, until time.Time
	c           *cron
	d           time.Duration
	loc         *time.Location
}

// parse checks everything validate checks of w except the walk over the
// calendar (a schedule that never opens, or whose openings come closer
// together than its duration), and returns w as Contains reads it.
func (w *FreezeWindow) parse() (*openings, error) {
	ranged := w.From != "" || w.Until != ""
	scheduled := w.Schedule != "" || w.Duration != ""
	switch {
	case ranged && scheduled:
		return nil, fmt.Errorf("give either from/until or schedule/duration, not both")
	case ranged && w.TimeZone != "":
		return nil, fmt.Errorf("timeZone %q: only for a schedule (from and until carry their own offsets)", w.TimeZone)
	case ranged:
		from, err1 := time.Parse(time.RFC3339, w.From)
		until, err2 := time.Parse(time.RFC3339, w.Until)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("from %q / until %q: want RFC 3339 times", w.From, w.Until)
		}
		if !from.Before(until) {
			return nil, fmt.Errorf("from %s is not before until %s", w.From, w.Until)
		}
		return &openings{from: from, until: until}, nil
	case scheduled:
		c, err := parseCron(w.Schedule)
		if err != nil {
			return nil, fmt.Errorf("schedule %q: %w", w.Schedule, err)
		}
		d, err := time.ParseDuration(w.Duration)
		if err != nil || d < time.Minute || d > MaxScheduledFreeze {
			return nil, fmt.Errorf("duration %q: want between 1m and %s", w.Duration, MaxScheduledFreeze)
		}
		loc, err := w.location()
		if err != nil {
			return nil, err
		}
		return &openings{c: c, d: d, loc: loc}, nil
	default:
		return nil, fmt.Errorf("give from/until or schedule/duration")
	}
}

func (w *FreezeWindow) validate() error {
	o, err := w.parse()
	if err != nil || o.c == nil {
		return err
	}
	p, ok := o.c.shortestPeriod()
	if !ok {
		return fmt.Errorf("schedule %q never opens: no date of the calendar matches its day-of-month, month and day-of-week", w.Schedule)
	}
	if o.d >= p.gap {
		return fmt.Errorf("duration %q is not shorter than the %s between two openings of schedule %q (%s to %s on its clock): "+
			"the next window would open before this one has closed, and windows that overlap freeze without a break (for good when every gap is that short); "+
			"give a shorter duration, or a date range (from, until) for a longer freeze",
			w.Duration, formatPeriod(p.gap), w.Schedule, p.from.Format("Jan 2 15:04"), p.to.Format("Jan 2 15:04"))
	}
	if q, ok := o.c.shortestAcrossClockChanges(o.loc, o.d); ok {
		return fmt.Errorf("duration %q is not shorter than the %s of elapsed time between two openings of schedule %q across a clock change in %s (%s to %s): "+
			"the next window would open before this one has closed, and windows that overlap freeze without a break; "+
			"give a shorter duration, or a date range (from, until) for a longer freeze",
			w.Duration, formatPeriod(q.gap), w.Schedule, o.loc, q.from.Format("Jan 2 2006 15:04 MST"), q.to.Format("Jan 2 2006 15:04 MST"))
	}
	return nil
}

// Contains reports whether t falls inside the window. A window that
// Validate refuses for its fields (both a date range and a schedule, a
// time zone for a date range, a duration under a minute, an unreadable
// time, schedule or zone) contains nothing; the one it refuses after
// walking the calendar are read as written: a schedule that never opens
// contains nothing, and one whose openings overlap contains every moment
// one of them covers.
func (w *FreezeWindow) Contains(t time.Time) bool {
	o, err := w.parse()
	if err != nil {
		return false
	}
	t = t.UTC()
	if o.c == nil {
		return !t.Before(o.from) && t.Before(o.until)
	}
	// The window is open at t when it opened at a minute m with
	// t-d < m <= t: minutes are counted in elapsed time and each is read
	// on the zone's wall clock.
	for m := t.Truncate(time.Minute); m.After(t.Add(-o.d)); m = m.Add(-time.Minute) {
		if o.c.matches(m.In(o.loc)) {
			return true
		}
	}
	return false
}

// location is the zone a schedule is read in: UTC unless TimeZone names
// one. "Local" is refused: a policy must not depend on the machine that
// evaluates it.
func (w *FreezeWindow) location() (*time.Location, error) {
	switch w.TimeZone {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("timeZone %q: name a zone (for example Europe/Berlin or UTC), not the evaluating machine's", w.TimeZone)
	}
	loc, err := time.LoadLocation(w.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("timeZone %q: not a time zone of the IANA database (for example Europe/Berlin)", w.TimeZone)
	}
	return loc, nil
}

// FrozenAt returns the first freeze window that contains t, or nil.
func (r *Rollout) FrozenAt(t time.Time) *FreezeWindow {
	if r == nil {
		return nil
	}
	for i := range r.FreezeWindows {
		if r.FreezeWindows[i].Contains(t) {
			return &r.FreezeWindows[i]
		}
	}
	return nil
}

// Describe names the window and its definition for messages.
func (w *FreezeWindow) Describe() string {
	if w.From != "" {
		return fmt.Sprintf("freeze window %q (%s to %s)", w.Name, w.From, w.Until)
	}
	zone := w.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	return fmt.Sprintf("freeze window %q (schedule %q for %s, %s)", w.Name, w.Schedule, w.Duration, zone)
}

// cron is a parsed five-field schedule: one bit per allowed value.
type cron struct {
	minute, hour, dom, month, dow uint64
	domStar, dowStar              bool
}

func (c *cron) matches(t time.Time) bool {
	if c.minute&(1<<uint(t.Minute())) == 0 || c.hour&(1<<uint(t.Hour())) == 0 || c.month&(1<<uint(t.Month())) == 0 {
		return false
	}
	return c.dayMatches(t.Day(), t.Weekday())
}

// dayMatches is cron's day rule (Vixie/ISC cron, crontab(5)): when both
// day fields are restricted, a day matches if either does; when either
// field starts with * (including */N), both must.
func (c *cron) dayMatches(day int, weekday time.Weekday) bool {
	dom := c.dom&(1<<uint(day)) != 0
	dow := c.dow&(1<<uint(weekday)) != 0
	if c.domStar || c.dowStar {
		return dom && dow
	}
	return dom || dow
}

// period is the shortest time between two openings of a schedule (on the
// wall clock, or elapsed across a clock change), and the two openings it
// was first seen between.
type period struct {
	gap      time.Duration
	from, to time.Time
}

// shortestPeriod returns the shortest time between two consecutive
// openings of c on the wall clock, over a full cycle of the Gregorian
// calendar (400 years, whose dates and weekdays then repeat); ok is false
// when c never opens (a day that no month it names has, such as 0 0 31 4 *
// or 0 0 30 2 *).
func (c *cron) shortestPeriod() (p period, ok bool) {
	minutes := c.dayMinutes()
	first, last := minutes[0], minutes[len(minutes)-1]
	at := func(y int, mo time.Month, d, minute int) time.Time {
		return time.Date(y, mo, d, minute/60, minute%60, 0, 0, time.UTC)
	}
	const start = 2000
	weekday := time.Date(start, 1, 1, 0, 0, 0, 0, time.UTC).Weekday()
	dayIndex, prevIndex := 0, -1
	var prevY, prevD int // the last day that opened
	var prevMo time.Month
	for y := start; y < start+400; y++ {
		for mo := time.January; mo <= time.December; mo++ {
			days := time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day()
			for d := 1; d <= days; d, dayIndex, weekday = d+1, dayIndex+1, (weekday+1)%7 {
				if c.month&(1<<uint(mo)) == 0 || !c.dayMatches(d, weekday) {
					continue
				}
				if !ok {
					ok = true
					for i := 1; i < len(minutes); i++ { // within the first day that opens
						if g := time.Duration(minutes[i]-minutes[i-1]) * time.Minute; p.gap == 0 || g < p.gap {
							p = period{gap: g, from: at(y, mo, d, minutes[i-1]), to: at(y, mo, d, minutes[i])}
						}
					}
				} else if g := time.Duration((dayIndex-prevIndex)*24*60-last+first) * time.Minute; p.gap == 0 || g < p.gap {
					p = period{gap: g, from: at(prevY, prevMo, prevD, last), to: at(y, mo, d, first)}
				}
				prevIndex, prevY, prevMo, prevD = dayIndex, y, mo, d
			}
		}
	}
	if ok && p.gap == 0 { // opens once a day, on one day of the cycle only
		p.gap = time.Duration(math.MaxInt64)
	}
	return p, ok
}

// dayMinutes returns the minutes of a day at which c opens, ascending.
func (c *cron) dayMinutes() []int {
	var minutes []int
	for h := 0; h < 24; h++ {
		for m := 0; m < 60; m++ {
			if c.hour&(1<<uint(h)) != 0 && c.minute&(1<<uint(m)) != 0 {
				minutes = append(minutes, h*60+m)
			}
		}
	}
	return minutes
}

// formatPeriod writes d in hours and minutes, with days when it is longer
// than two: "30m", "1h", "168h (7 days)".
func formatPeriod(d time.Duration) string {
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	s := fmt.Sprintf("%dh", h)
	switch {
	case h == 0:
		s = fmt.Sprintf("%dm", m)
	case m != 0:
		s = fmt.Sprintf("%dh%dm", h, m)
	}
	if d >= 48*time.Hour && d%(24*time.Hour) == 0 {
		s += fmt.Sprintf(" (%d days)", d/(24*time.Hour))
	}
	return s
}

func parseCron(s string) (*cron, error) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return nil, fmt.Errorf("want five fields (minute hour day-of-month month day-of-week), got %d", len(f))
	}
	var c cron
	var err error
	for i, spec := range []struct {
		dst      *uint64
		lo, hi   int
		name     string
		starFlag *bool
	}{
		{&c.minute, 0, 59, "minute", nil},
		{&c.hour, 0, 23, "hour", nil},
		{&c.dom, 1, 31, "day-of-month", &c.domStar},
		{&c.month, 1, 12, "month", nil},
		{&c.dow, 0, 7, "day-of-week", &c.dowStar},
	} {
		if *spec.dst, err = parseCronField(f[i], spec.lo, spec.hi); err != nil {
			return nil, fmt.Errorf("%s %q: %w", spec.name, f[i], err)
		}
		if spec.starFlag != nil {
			// As in Vixie/ISC cron: a day field that starts with *
			// (*, */2) counts as unrestricted in the day rule.
			*spec.starFlag = strings.HasPrefix(f[i], "*")
		}
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow |= 1
	}
	return &c, nil
}

// parseCronField parses a comma list of *, N, A-B, with an optional /STEP.
func parseCronField(s string, lo, hi int) (uint64, error) {
	var bits uint64
	for _, part := range strings.Split(s, ",") {
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("step %q: want a positive number", stepStr)
			}
			step = n
		}
		a, b := lo, hi
		if rng != "*" {
			first, last, isRange := strings.Cut(rng, "-")
			x, err := strconv.Atoi(first)
			if err != nil {
				return 0, fmt.Errorf("%q: want *, a number or a range", rng)
			}
			a, b = x, x
			if isRange {
				if b, err = strconv.Atoi(last); err != nil {
					return 0, fmt.Errorf("%q: want a range A-B", rng)
				}
			} else if hasStep {
				b = hi
			}
		}
		if a < lo || b > hi || a > b {
			return 0, fmt.Errorf("%d-%d: out of range %d-%d", a, b, lo, hi)
		}
		for v := a; v <= b; v += step {
			bits |= 1 << uint(v)
		}
	}
	return bits, nil
}
