// Package textlist names a long list in a message or a result by its first
// items and how many there are, so that what reports on 100,000 targets
// stays as short as what reports on three.
package textlist

import (
	"fmt"
	"strings"
)

// Join returns the first n of xs joined by ", ", followed by " and K more"
// when total counts K items more than it names ("K more" when it names
// none). xs are the first items of a list of total items (all of them, or
// the first that First kept).
func Join(xs []string, total, n int) string {
	shown := xs[:min(max(n, 0), len(xs))]
	s := strings.Join(shown, ", ")
	switch more := total - len(shown); {
	case more > 0 && s == "":
		s = fmt.Sprintf("%d more", more)
	case more > 0:
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}

// First keeps the first N items added to it and counts them all.
type First struct {
	N     int      // how many items to keep
	Items []string // the first N items added, in order
	Count int      // how many items were added
}

// Add counts item and keeps it if fewer than N are kept.
func (f *First) Add(item string) {
	if f.Count++; len(f.Items) < f.N {
		f.Items = append(f.Items, item)
	}
}

// String is the items kept, followed by how many more were counted.
func (f *First) String() string { return Join(f.Items, f.Count, len(f.Items)) }
