package registry

import (
	"fmt"
	"io"
	"time"
)

// Progress reports a long publication on w (for example stderr) at most
// once per interval, plus a final line: artifacts done (of the total when
// known), how many were pushed and how many were already present, and the
// rate. Its Report method is a PublishRequest.Progress.
type Progress struct {
	w        io.Writer
	total    int
	interval time.Duration
	now      func() time.Time

	start, last           time.Time
	done, pushed, present int
}

// NewProgress returns a Progress writing to w; total is the number of
// artifacts expected (0: unknown) and interval the least time between two
// lines (0: 2 s). now is the clock (nil: time.Now).
func NewProgress(w io.Writer, total int, interval time.Duration, now func() time.Time) *Progress {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	if now == nil {
		now = time.Now
	}
	t := now()
	return &Progress{w: w, total: total, interval: interval, now: now, start: t, last: t}
}

// Report counts r and prints a line when interval has passed since the
// last one. Publish and PublishSeq call it serialized.
func (p *Progress) Report(r Result) {
	p.done++
	if r.Pushed {
		p.pushed++
	} else {
		p.present++
	}
	if t := p.now(); t.Sub(p.last) >= p.interval {
		p.last = t
		p.line(t)
	}
}

// Finish prints the final line.
func (p *Progress) Finish() { p.line(p.now()) }

func (p *Progress) line(t time.Time) {
	of := ""
	if p.total > 0 {
		of = fmt.Sprintf("/%d", p.total)
	}
	rate := 0.0
	if d := t.Sub(p.start).Seconds(); d > 0 {
		rate = float64(p.done) / d
	}
	fmt.Fprintf(p.w, "publish: %d%s artifacts (%d pushed, %d already present) %.0f/s\n", p.done, of, p.pushed, p.present, rate)
}
