package compiler

import (
	"fmt"

	"github.com/configpub/configpub/bundle"
)

// Stale returns nil when the committed release manifest is exactly what the
// sources and the trusted previous release derive, and otherwise an error
// wrapping ErrStale that names the first differing field (and target), or
// why the committed release could not be verified.
func (r *Result) Stale() error {
	if r.UpToDate {
		return nil
	}
	if r.stale != nil {
		return r.stale
	}
	return fmt.Errorf("%w: %s is not what the sources compile to", ErrStale, ManifestPath(r.Manifest.EnvTag))
}

// firstDifference explains how the committed release differs from the one
// derived from the sources and prev (nil for release 1).
func firstDifference(committed, derived, prev *bundle.Manifest) error {
	p := ManifestPath(committed.EnvTag)
	from := "the sources"
	if prev != nil {
		from = fmt.Sprintf("the sources and recorded release %d", prev.ReleaseVersion)
	}
	d, err := bundle.FirstDifference(committed, derived)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStale, p, err)
	}
	if d == nil {
		return fmt.Errorf("%w: %s is not in canonical form", ErrStale, p)
	}
	where := d.Field
	if d.Target != "" {
		where = "target " + d.Target + ": " + d.Field
	}
	return fmt.Errorf("%w: %s: %s is %s, but %s derive %s", ErrStale, p, where, orNone(d.A), from, orNone(d.B))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
