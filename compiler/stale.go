package compiler

import (
	"fmt"
)

// Stale returns nil when the committed release manifest is exactly what the
// sources compile to, and otherwise an error wrapping ErrStale that names
// the first differing target (or input).
func (r *Result) Stale() error {
	if r.UpToDate {
		return nil
	}
	env := r.Manifest.EnvTag
	p := ManifestPath(env)
	if r.Base == nil {
		return fmt.Errorf("%w: %s does not exist; run configpub compile", ErrStale, p)
	}
	for i := range r.Targets {
		t := &r.Targets[i]
		b := r.Base.Target(t.Host, t.ServiceID)
		if b == nil {
			return fmt.Errorf("%w: %s: target %s is new", ErrStale, p, t.Identity())
		}
		if t.Changed {
			what := "artifactDigest " + b.ArtifactDigest + " -> " + t.ArtifactDigest
			switch {
			case b.PolicyDigest != t.PolicyDigest:
				what = "policyDigest " + b.PolicyDigest + " -> " + t.PolicyDigest
			case b.ContentDigest != t.ContentDigest:
				what = "contentDigest " + b.ContentDigest + " -> " + t.ContentDigest
			case b.PropertySetDigest != t.PropertySetDigest:
				what = "propertySetDigest " + b.PropertySetDigest + " -> " + t.PropertySetDigest
			case b.LeaseProfile != t.LeaseProfile || b.LeaseProfileDigest != r.Manifest.Target(t.Host, t.ServiceID).LeaseProfileDigest:
				what = "lease profile " + b.LeaseProfile + " -> " + t.LeaseProfile
			}
			return fmt.Errorf("%w: %s: target %s changed: %s", ErrStale, p, t.Identity(), what)
		}
	}
	for i := range r.Base.Targets {
		b := &r.Base.Targets[i]
		if r.Manifest.Target(b.Host, b.ServiceID) == nil {
			return fmt.Errorf("%w: %s: target %s was removed", ErrStale, p, b.Identity(env))
		}
	}
	old := map[string]string{}
	for _, in := range r.Base.Inputs {
		old[in.Path] = in.Digest
	}
	for _, in := range r.Manifest.Inputs {
		if old[in.Path] != in.Digest {
			return fmt.Errorf("%w: %s: input %s changed (%s -> %s)", ErrStale, p, in.Path, orNone(old[in.Path]), in.Digest)
		}
		delete(old, in.Path)
	}
	for _, path := range sortedKeys(old) {
		return fmt.Errorf("%w: %s: input %s is no longer used", ErrStale, p, path)
	}
	return fmt.Errorf("%w: %s differs from what the sources compile to (not in canonical form)", ErrStale, p)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
