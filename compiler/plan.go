package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
)

// Plan is what a reviewer needs to judge a release: every target whose
// artifact changes against a base — ADDED (new in this release), RETIRED (in
// the base release, no longer in this one: activation retires its identity)
// or CHANGED — with the JSON-pointer paths added, removed and changed in its
// audience namespace and settings, the old and new digests, and how many
// targets stay unchanged.
type Plan struct {
	EnvTag      string       `json:"envTag"`
	BaseRef     string       `json:"baseRef,omitempty"`
	BaseRelease int64        `json:"baseRelease"`
	Release     int64        `json:"release"`
	Changed     []TargetPlan `json:"changed"`
	Unchanged   int          `json:"unchanged"`
	// AddedTargets and RetiredTargets count the entries of Changed whose
	// change is "added" and "retired".
	AddedTargets   int `json:"addedTargets"`
	RetiredTargets int `json:"retiredTargets"`
}

// TargetPlan is one changed, added or retired target.
type TargetPlan struct {
	Host      string `json:"host"`
	ServiceID string `json:"serviceId"`
	Audience  string `json:"audience"`
	Change    string `json:"change"` // added | retired | changed
	// Reason says why an otherwise unchanged target gets a new snapshot
	// (its activation window no longer contains the release's createdAt).
	Reason   string                `json:"reason,omitempty"`
	Digests  map[string]DigestPair `json:"digests"`
	Added    []string              `json:"added"`
	Removed  []string              `json:"removed"`
	Modified []string              `json:"changed"`
}

// DigestPair is an old -> new digest ("" when absent).
type DigestPair struct {
	Old string `json:"old"`
	New string `json:"new"`
}

// NewPlan compares the targets of two compiles of one environment. base may
// be nil (everything is added). Targets compare by the artifact digest of
// their manifest entries; paths are JSON pointers into values.yml
// (/agentPolicy/model/maxOutputTokens, /server.httpsPort), from the
// Targets of base and head, which need hold only the targets that differ
// (PlanTargets).
func NewPlan(base, head *Result, baseRef string) (*Plan, error) {
	p := &Plan{EnvTag: head.Manifest.EnvTag, BaseRef: baseRef, Release: head.Manifest.ReleaseVersion, Changed: []TargetPlan{}}
	if base != nil {
		p.BaseRelease = base.Manifest.ReleaseVersion
	}
	old := artifactsOf(base)
	oldT, newT := targetIndex(base), targetIndex(head)
	compiled := func(t map[[2]string]*Target, k [2]string, which string) (*Target, error) {
		if x := t[k]; x != nil {
			return x, nil
		}
		return nil, fmt.Errorf("plan %s: target %s/%s differs, but the %s compile does not hold it", p.EnvTag, k[0], k[1], which)
	}
	reasons := map[[2]string]string{}
	for _, r := range head.Reissued {
		reasons[[2]string{r.Host, r.ServiceID}] = r.Reason
	}
	err := head.eachArtifact(func(host, serviceID, artifact string) error {
		k := [2]string{host, serviceID}
		o, inBase := old[k]
		delete(old, k)
		if inBase && o == artifact {
			p.Unchanged++
			return nil
		}
		n, err := compiled(newT, k, "new")
		if err != nil {
			return err
		}
		var ot *Target
		if inBase {
			if ot, err = compiled(oldT, k, "base"); err != nil {
				return err
			}
		}
		tp, err := targetPlan(ot, n)
		if err != nil {
			return err
		}
		tp.Reason = reasons[k]
		p.Changed = append(p.Changed, tp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for k := range old {
		ot, err := compiled(oldT, k, "base")
		if err != nil {
			return nil, err
		}
		tp, err := targetPlan(ot, nil)
		if err != nil {
			return nil, err
		}
		p.Changed = append(p.Changed, tp)
	}
	for _, t := range p.Changed {
		switch t.Change {
		case bundle.ChangeAdded:
			p.AddedTargets++
		case bundle.ChangeRetired:
			p.RetiredTargets++
		}
	}
	sort.Slice(p.Changed, func(i, j int) bool {
		a, b := p.Changed[i], p.Changed[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.ServiceID < b.ServiceID
	})
	return p, nil
}

// targetIndex maps the compiled targets of r (nil: none) by host and
// serviceId.
func targetIndex(r *Result) map[[2]string]*Target {
	m := map[[2]string]*Target{}
	if r != nil {
		for i := range r.Targets {
			t := &r.Targets[i]
			m[[2]string{t.Host, t.ServiceID}] = t
		}
	}
	return m
}

// artifactsOf maps the targets of r's release (nil: none) by host and
// serviceId to their artifact digests.
func artifactsOf(r *Result) map[[2]string]string {
	m := map[[2]string]string{}
	if r != nil {
		_ = r.eachArtifact(func(host, serviceID, artifact string) error {
			m[[2]string{host, serviceID}] = artifact
			return nil
		})
	}
	return m
}

// PlanKeep returns the Options.Keep of a compile planned against base
// (nil: none): it keeps the targets whose artifact differs from their
// entry in base, or that base lacks — the targets of that compile a plan
// reports. Compiled with it, a release holds them from its first pass and
// PlanTargets does not compile it again.
func PlanKeep(base *Result) func(*bundle.TargetEntry) bool {
	old := artifactsOf(base)
	return func(e *bundle.TargetEntry) bool {
		d, ok := old[[2]string{e.Host, e.ServiceID}]
		return !ok || d != e.ArtifactDigest
	}
}

// CommittedChanges returns the hosts whose shard of envTag's committed
// release differs between two policy trees (or that one of them lacks),
// or nil when either does not hold a sharded release. Only the root files
// are read. When both committed releases are what their sources compile
// to — a pull request that commits the release it compiled — every target
// that differs between the two compiles is on one of these hosts, so a
// plan that compiles the base keeping their targets (Options.Keep) does
// not compile it again; when they are not, PlanTargets finds a target
// missing and compiles the base's hosts again.
func CommittedChanges(base, head fs.FS, envTag string) map[string]bool {
	shards := func(fsys fs.FS) map[string]string {
		b, err := fs.ReadFile(fsys, ManifestPath(envTag))
		if err != nil || !bundle.IsSharded(b) {
			return nil
		}
		refs, err := bundle.ShardRefs(ManifestPath(envTag), b)
		if err != nil {
			return nil
		}
		m := make(map[string]string, len(refs))
		for _, r := range refs {
			m[r.Host] = r.Digest
		}
		return m
	}
	old, cur := shards(base), shards(head)
	if old == nil || cur == nil {
		return nil
	}
	changed := map[string]bool{}
	for h, d := range cur {
		if od, ok := old[h]; !ok || od != d {
			changed[h] = true
		}
	}
	for h := range old {
		if _, ok := cur[h]; !ok {
			changed[h] = true
		}
	}
	return changed
}

// PlanTargets sets the Targets of base (nil: none) and head, compiled with
// Options.ManifestOnly, to the targets a plan of the two reports — those
// whose artifact differs, or that one of the two releases lacks — and no
// other. A result that holds them already (compiled with Options.Keep, as
// PlanKeep makes it) keeps them; the other is compiled again, only the
// hosts that hold one (Result.EachTargetOf): a plan of a large environment
// holds its changed targets, never every artifact of two releases.
func PlanTargets(ctx context.Context, base, head *Result) error {
	differ := map[[2]string]bool{}
	old := artifactsOf(base)
	_ = head.eachArtifact(func(host, serviceID, artifact string) error {
		k := [2]string{host, serviceID}
		if d, ok := old[k]; !ok || d != artifact {
			differ[k] = true
		}
		delete(old, k)
		return nil
	})
	for k := range old {
		differ[k] = true
	}
	hosts := map[string]bool{}
	for k := range differ {
		hosts[k[0]] = true
	}
	for _, r := range []*Result{base, head} {
		if r == nil {
			continue
		}
		if kept, ok := heldDiffering(r, differ); ok {
			r.Targets = kept
			continue
		}
		var kept []Target
		err := r.EachTargetOf(ctx, func(host string) bool { return hosts[host] }, func(t *Target) error {
			if differ[[2]string{t.Host, t.ServiceID}] {
				kept = append(kept, *t)
			}
			return nil
		})
		if err != nil {
			return err
		}
		r.Targets = kept
	}
	return nil
}

// heldDiffering returns the targets of r that differ, when r.Targets holds
// every one of them (false: r must compile them again).
func heldDiffering(r *Result, differ map[[2]string]bool) ([]Target, bool) {
	if r.Targets == nil {
		return nil, false
	}
	want := 0
	_ = r.eachArtifact(func(host, serviceID, _ string) error {
		if differ[[2]string{host, serviceID}] {
			want++
		}
		return nil
	})
	var kept []Target
	for _, t := range r.Targets {
		if differ[[2]string{t.Host, t.ServiceID}] {
			kept = append(kept, t)
		}
	}
	return kept, len(kept) == want
}

func targetPlan(o, n *Target) (TargetPlan, error) {
	var tp TargetPlan
	ref := n
	switch {
	case o == nil:
		tp.Change = bundle.ChangeAdded
	case n == nil:
		tp.Change = bundle.ChangeRetired
		ref = o
	default:
		tp.Change = bundle.ChangeChanged
	}
	tp.Host, tp.ServiceID, tp.Audience = ref.Host, ref.ServiceID, ref.Audience
	get := func(t *Target, f func(*Target) string) string {
		if t == nil {
			return ""
		}
		return f(t)
	}
	tp.Digests = map[string]DigestPair{}
	for name, f := range map[string]func(*Target) string{
		"policyDigest":      func(t *Target) string { return t.PolicyDigest },
		"contentDigest":     func(t *Target) string { return t.ContentDigest },
		"propertySetDigest": func(t *Target) string { return t.PropertySetDigest },
		"artifactDigest":    func(t *Target) string { return t.ArtifactDigest },
	} {
		if a, b := get(o, f), get(n, f); a != b {
			tp.Digests[name] = DigestPair{Old: a, New: b}
		}
	}
	ns := "/" + bundle.Namespace(ref.Audience)
	var d differ
	oldNS, newNS, err := parsePair(o, n, func(t *Target) []byte { return t.Namespace })
	if err != nil {
		return tp, err
	}
	d.diff(ns, oldNS, newNS)
	oldPS, newPS, err := parsePair(o, n, func(t *Target) []byte { return t.PropertySet })
	if err != nil {
		return tp, err
	}
	d.diffMembers("", oldPS, newPS)
	tp.Added, tp.Removed, tp.Modified = nonNil(d.added), nonNil(d.removed), nonNil(d.changed)
	return tp, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func parsePair(o, n *Target, f func(*Target) []byte) (*render.Value, *render.Value, error) {
	parse := func(t *Target) (*render.Value, error) {
		if t == nil {
			return nil, nil
		}
		var v render.Value
		if err := v.UnmarshalJSON(f(t)); err != nil {
			return nil, err
		}
		return &v, nil
	}
	a, err := parse(o)
	if err != nil {
		return nil, nil, err
	}
	b, err := parse(n)
	return a, b, err
}

// differ collects JSON-pointer paths. Maps compare member by member, lists
// item by item; a subtree that appears or disappears is one path. A list
// whose items are all objects with an identity (listKeys: a Knowledge
// replica inventory and its tombstones by kind and id, accepted
// publications by agent, an agent's publications by publicationId)
// compares items by it: an item removed from the middle of such a list,
// or one that moved, is one removed path (or none), not a change of every
// item after it. A list whose items are the same in another order (only
// reordered) is one changed path, the list's.
type differ struct{ added, removed, changed []string }

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func (d *differ) diff(path string, a, b *render.Value) {
	switch {
	case a == nil && b == nil:
	case a == nil:
		d.added = append(d.added, path)
	case b == nil:
		d.removed = append(d.removed, path)
	case a.Kind == render.KindMap && b.Kind == render.KindMap:
		d.diffMembers(path, a, b)
	case render.Reordered(a, b):
		// The same items in another order: one change of the list, not
		// one per position (and none at all for a list compared by key,
		// whose items only moved).
		d.changed = append(d.changed, path)
	case a.Kind == render.KindList && b.Kind == render.KindList:
		if ka, keys, ok := keyedItems(a); ok {
			if kb, ok := keyedBy(b, keys); ok {
				d.diffKeyed(path, a, b, ka, kb, keys)
				return
			}
		}
		for i := 0; i < len(a.Items) || i < len(b.Items); i++ {
			var x, y *render.Value
			if i < len(a.Items) {
				x = a.Items[i]
			}
			if i < len(b.Items) {
				y = b.Items[i]
			}
			d.diff(path+"/"+itoa(i), x, y)
		}
	default:
		ca, _ := render.Canonical(a)
		cb, _ := render.Canonical(b)
		if string(ca) != string(cb) {
			d.changed = append(d.changed, path)
		}
	}
}

// listKeys are the members that identify an item of a list, in the order
// tried: a replica inventory's (kind, id), an accepted-publications entry's
// agent, a publication's publicationId.
var listKeys = [][]string{{"kind", "id"}, {"agent"}, {"publicationId"}}

// itemKey is an item's identity under one of listKeys.
type itemKey [2]string

// keyedItems indexes the items of list v by the first of listKeys that
// every item has, as strings, and no two items share; keys is that one.
func keyedItems(v *render.Value) (idx map[itemKey]int, keys []string, ok bool) {
	if len(v.Items) == 0 {
		return nil, nil, false
	}
	for _, keys := range listKeys {
		if idx, ok := keyedBy(v, keys); ok {
			return idx, keys, true
		}
	}
	return nil, nil, false
}

func keyedBy(v *render.Value, keys []string) (map[itemKey]int, bool) {
	idx := make(map[itemKey]int, len(v.Items))
	for i, it := range v.Items {
		k, ok := keyOf(it, keys)
		if !ok {
			return nil, false
		}
		if _, dup := idx[k]; dup {
			return nil, false
		}
		idx[k] = i
	}
	return idx, true
}

// keyOf is item it's identity under keys, when it has every member as a
// string.
func keyOf(it *render.Value, keys []string) (itemKey, bool) {
	var k itemKey
	if it.Kind != render.KindMap {
		return k, false
	}
	for i, name := range keys {
		m := it.Get(name)
		if m == nil || m.Kind != render.KindString {
			return k, false
		}
		k[i] = m.Str
	}
	return k, true
}

// diffKeyed compares two keyed lists item by item of the same key: an item
// only in a is removed at its index in a, one only in b added at its index
// in b, and one in both compared in place when its index did not move, or
// else (a path names one position in both documents) removed and added
// when it changed.
func (d *differ) diffKeyed(path string, a, b *render.Value, ka, kb map[itemKey]int, keys []string) {
	for i, it := range a.Items {
		k, _ := keyOf(it, keys)
		j, ok := kb[k]
		switch {
		case !ok:
			d.removed = append(d.removed, path+"/"+itoa(i))
		case i == j:
			d.diff(path+"/"+itoa(i), it, b.Items[j])
		default:
			ca, _ := render.Canonical(it)
			cb, _ := render.Canonical(b.Items[j])
			if string(ca) != string(cb) {
				d.removed = append(d.removed, path+"/"+itoa(i))
				d.added = append(d.added, path+"/"+itoa(j))
			}
		}
	}
	for j, it := range b.Items {
		if k, _ := keyOf(it, keys); !hasKey(ka, k) {
			d.added = append(d.added, path+"/"+itoa(j))
		}
	}
}

func hasKey(m map[itemKey]int, k itemKey) bool {
	_, ok := m[k]
	return ok
}

func (d *differ) diffMembers(path string, a, b *render.Value) {
	keys := map[string]bool{}
	for _, v := range []*render.Value{a, b} {
		if v != nil {
			for _, k := range v.Keys {
				keys[k] = true
			}
		}
	}
	for _, k := range sortedKeys(keys) {
		d.diff(path+"/"+escapePointer(k), a.Get(k), b.Get(k))
	}
}

// WriteJSON writes the plan as indented JSON.
func (p *Plan) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}
