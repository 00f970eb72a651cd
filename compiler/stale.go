package compiler

import (
	"errors"
	"fmt"

	"github.com/configpub/configpub/bundle"
)

// Stale returns nil when the committed release manifest is exactly what the
// sources and the trusted previous release derive, and otherwise an error
// wrapping ErrStale that names the first differing field (and target), or
// why the committed release could not be verified — not wrapping ErrStale
// when the Git history its previous release was looked up in is incomplete
// (bundle.ErrHistoryIncomplete: a shallow clone), which says nothing of
// whether it is stale.
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
// derived from the sources and prev (nil for release 1), naming first the
// inputs that changed since it was compiled, when that is known.
func firstDifference(committed, derived, prev *bundle.Manifest, changed inputChanges) error {
	p := ManifestPath(committed.EnvTag)
	from := "the sources"
	if prev != nil {
		from = fmt.Sprintf("the sources and base release %d", prev.ReleaseVersion)
	}
	d, err := bundle.FirstDifference(committed, derived)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStale, p, err)
	}
	if d == nil {
		return fmt.Errorf("%w: %s %w", ErrStale, p, errNotCanonical)
	}
	if d.Target != "" && d.Field == "(entry)" {
		// A whole target is missing on one side: say which, not the
		// entry's JSON.
		if d.B == "" {
			return fmt.Errorf("%w: %s: target %s is not declared by any source (was it in an uncommitted or ignored file?)", ErrStale, p, d.Target)
		}
		if d.A == "" {
			return fmt.Errorf("%w: %s: target %s is declared by the sources, but the release does not list it (compile, and commit %s)", ErrStale, p, d.Target, p)
		}
	}
	where := d.Field
	if d.Target != "" {
		where = "target " + d.Target + ": " + d.Field
	}
	if what := changed.describe(committed.ReleaseVersion); what != "" {
		if sameValues(committed, derived) {
			what += "; no target's values changed"
		}
		return fmt.Errorf("%w: %s: %s (%s is %s, but %s derive %s)", ErrStale, p, what, where, orNone(d.A), from, orNone(d.B))
	}
	return fmt.Errorf("%w: %s: %s is %s, but %s derive %s", ErrStale, p, where, orNone(d.A), from, orNone(d.B))
}

// errNotCanonical: the committed release holds what derives, not in the
// bytes compile writes.
var errNotCanonical = errors.New("is not in canonical form")

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// inputCheck tells, host by host before release N derives, whether N can
// still derive byte for byte: what the committed release records of the
// inputs it was compiled from. A host whose inputs differ from the record
// makes N stale, so that a compile that will write release N+1 anyway
// does not derive N at all.
type inputCheck struct {
	env     string
	release int64             // N
	shared  map[string]string // the root's inputs: path -> digest
	hosts   map[string]string // each shard's inputsDigest by host; "" when unreadable
}

// inputsChangedError ends a derivation of the committed release that
// inputCheck found stale.
type inputsChangedError struct{ reason string }

func (e *inputsChangedError) Error() string { return e.reason }

// host checks the inputs one host's targets read (path -> digest) against
// the record. Were release N what they derive, the root would list every
// input it shares with other hosts under its current digest, and the
// host's shard would state the digest of the rest (InputsDigest); any
// other finding means N does not derive, and says which input or host
// changed. A shard whose inputsDigest cannot be read from its header
// (not in the form compile writes it) is left to the comparison of the
// whole release.
func (k *inputCheck) host(h string, in files) error {
	if len(in) == 0 {
		return nil // a host without targets (its Agents compile for workflow views only) reads nothing
	}
	want, ok := k.hosts[h]
	if !ok {
		return &inputsChangedError{fmt.Sprintf("host %s has targets but no shard in release %d", h, k.release)}
	}
	var own []bundle.Input
	for _, p := range sortedKeys(in) {
		d, shared := k.shared[p]
		switch {
		case !shared:
			own = append(own, bundle.Input{Path: p, Digest: in[p]})
		case d != in[p]:
			return &inputsChangedError{fmt.Sprintf("%s changed since release %d (%s, now %s)", p, k.release, d, in[p])}
		}
	}
	got, err := bundle.InputsDigest(own)
	if err != nil {
		return err
	}
	if want != "" && got != want {
		return &inputsChangedError{fmt.Sprintf("the inputs of host %s changed since release %d (%s states inputsDigest %s, the sources %s)",
			h, k.release, bundle.ShardPath(k.env, h), want, got)}
	}
	return nil
}

// sharedInputs checks the inputs the root lists (those every host may read)
// against the documents read, before any host compiles: one that is gone
// or changed means release N does not derive. Sources whose index was let
// go (a partitioned model's) cannot tell, and pass.
func (k *inputCheck) sharedInputs(ss *sources) error {
	if ss.byKind == nil {
		return nil
	}
	now := files{}
	for _, docs := range ss.byKind {
		for _, s := range docs {
			if _, ok := k.shared[s.File]; ok {
				now.add(s)
			}
		}
	}
	for _, p := range sortedKeys(k.shared) {
		d, ok := now[p]
		switch {
		case !ok:
			return &inputsChangedError{fmt.Sprintf("%s, an input of release %d, is gone", p, k.release)}
		case d != k.shared[p]:
			return &inputsChangedError{fmt.Sprintf("%s changed since release %d (%s, now %s)", p, k.release, k.shared[p], d)}
		}
	}
	return nil
}
