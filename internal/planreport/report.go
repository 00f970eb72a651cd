package planreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// Limits on what a report carries, so a large change stays readable.
const (
	maxValueText      = 160 // characters of a value shown inline
	maxSourceChanges  = 100 // source changes listed per file
	longString        = 72  // strings longer than this (or multi-line) are diffed
	diffContext       = 2   // context lines around each change of a diff
	maxDiffTextLength = 256 << 10
)

// Report is a plan as a reviewer reads it.
type Report struct {
	EnvTag         string   `json:"envTag"`
	BaseRef        string   `json:"baseRef,omitempty"`
	BaseRelease    int64    `json:"baseRelease"`
	Release        int64    `json:"release"`
	Changed        []Target `json:"changed"`
	Unchanged      int      `json:"unchanged"`
	AddedTargets   int      `json:"addedTargets"`
	RetiredTargets int      `json:"retiredTargets"`
	// DigestsFinal: the committed release manifest is exactly what the
	// sources compile to, so the digests shown are the ones promotion
	// activates. Otherwise Provisional says why they may still change.
	DigestsFinal bool   `json:"digestsFinal"`
	Provisional  string `json:"provisional,omitempty"`
	// PromotableFrom and PromotableUntil bound when the new release can be
	// promoted: the activation windows of the snapshots it creates (their
	// latest start and earliest end; promote refuses it outside them). Both
	// are empty when it creates none. They follow the release's createdAt,
	// so they are provisional whenever the digests are.
	PromotableFrom  string `json:"promotableFrom,omitempty"`
	PromotableUntil string `json:"promotableUntil,omitempty"`
	// NotOnBase, set by the caller (who reads the Git history), says why
	// the release as it stands is not promotable and what to run: it is
	// built on a release the base's history does not hold (a branch that
	// compiled more than once: N+2 on its own N+1, where the base holds
	// N), or the working tree's release went back (a revert).
	NotOnBase string `json:"notOnBase,omitempty"`
	// RollbackTo is the base release, the one configpub rollback returns
	// to once the new release is promoted if it was active (a release
	// promote caught up, recorded and never activated, is moved to with
	// configpub activate instead: plan does not read the store, so it
	// cannot tell which), and RollbackUntil the earliest end of its
	// snapshots' activation windows: until then a rollback (or that
	// activation) to it can move every target back. RollbackEnded says it ends no later
	// than the new release's createdAt: the new release then re-issues a
	// target whose snapshot's window ended, and a rollback to the base
	// release is refused (revert and promote instead). Empty for a first
	// release or when no new release is compiled.
	RollbackTo    int64  `json:"rollbackTo,omitempty"`
	RollbackUntil string `json:"rollbackUntil,omitempty"`
	RollbackEnded bool   `json:"rollbackEnded,omitempty"`
	// Renewal: the new release is compiled from the same sources as the
	// base release (configpub compile --renew): it only re-issues the
	// targets whose activation windows ended or end within their lease
	// profile's renewBefore, and the Gateways and Knowledge services bound
	// to them list the new publications.
	Renewal bool `json:"renewal,omitempty"`
	// RolloutChanges lists how the environment's rollout policy changes
	// with the new release: one entry per member that differs
	// ("activation", "freezeWindows", "healthGate"), with its old and new
	// value (absent: the default). A change holds once the new release is
	// active: its own promotion and activation are held by the active
	// release's policy (its freeze windows, its two-phase requirement).
	RolloutChanges []ValueChange `json:"rolloutChanges,omitempty"`
}

// Target is one added, retired or changed target.
type Target struct {
	compiler.TargetPlan
	SubjectKind string `json:"subjectKind"`
	SubjectName string `json:"subjectName"`
	// Declared is the file of the Target document (added and retired targets).
	Declared string `json:"declaredIn,omitempty"`
	// Because lists the source documents that changed and that are not the
	// target's own subject: a Gateway or Knowledge target changes when an
	// Agent bound to it does.
	Because []Cause `json:"because,omitempty"`
	// Values are the old and new values of each changed path (changed
	// targets only: an added or retired target lists its paths).
	Values []ValueChange `json:"values,omitempty"`
}

// Cause is a changed source document.
type Cause struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"`
	Change string `json:"change"` // added | removed | changed
}

// ValueChange is one changed path of values.yml.
type ValueChange struct {
	Path string          `json:"path"`
	Old  json.RawMessage `json:"old,omitempty"`
	New  json.RawMessage `json:"new,omitempty"`
	// Diff is a unified diff of a long or multi-line string.
	Diff string `json:"diff,omitempty"`
	// Reordered: Old and New are lists of the same items in another
	// order (a list setting only reordered).
	Reordered bool `json:"reordered,omitempty"`
	// Source is the file:line of the source field whose change this is
	// ("" when no single source field has exactly these values).
	Source string `json:"source,omitempty"`
}

// Input is what a report is built from: the plan, both compiles and both
// source trees (the base tree at the plan's base revision).
type Input struct {
	Plan           *compiler.Plan
	Base, Head     *compiler.Result
	BaseFS, HeadFS fs.FS
}

// New builds the report of in.Plan.
func New(in Input) (*Report, error) {
	p := in.Plan
	r := &Report{EnvTag: p.EnvTag, BaseRef: p.BaseRef, BaseRelease: p.BaseRelease, Release: p.Release,
		Unchanged: p.Unchanged, AddedTargets: p.AddedTargets, RetiredTargets: p.RetiredTargets, Changed: []Target{}}
	r.DigestsFinal = in.Head.UpToDate
	if err := in.Head.Stale(); errors.Is(err, bundle.ErrHistoryIncomplete) {
		r.Provisional = fmt.Sprintf("the digests shown may still change: %v", err)
	} else if !r.DigestsFinal {
		r.Provisional = fmt.Sprintf("%s is not compiled from these sources, so the digests shown may still change "+
			"(they depend on the new release's createdAt, %s); run configpub compile and commit %s: "+
			"promote refuses a release manifest that is not up to date, and the committed one fixes every digest",
			compiler.ManifestPath(p.EnvTag), in.Head.Manifest.CreatedAt, compiler.ManifestPath(p.EnvTag))
	}
	if p.Release != p.BaseRelease {
		r.PromotableFrom, r.PromotableUntil = in.Head.PromotionWindow()
		if in.Base != nil && p.BaseRelease > 0 {
			if _, until := in.Base.ActivationWindow(); until != "" {
				// The manifest's one time form orders as text.
				r.RollbackTo, r.RollbackUntil = p.BaseRelease, until
				r.RollbackEnded = until <= in.Head.Manifest.CreatedAt
			}
			r.Renewal = in.Base.SourcesDigest() == in.Head.SourcesDigest()
		}
	}
	if in.Base != nil {
		changes, err := rolloutChanges(&in.Base.Rollout, &in.Head.Rollout)
		if err != nil {
			return nil, err
		}
		r.RolloutChanges = changes
	}
	idx := func(res *compiler.Result) map[[2]string]*compiler.Target {
		m := map[[2]string]*compiler.Target{}
		if res != nil {
			for i := range res.Targets {
				t := &res.Targets[i]
				m[[2]string{t.Host, t.ServiceID}] = t
			}
		}
		return m
	}
	oldT, newT := idx(in.Base), idx(in.Head)
	docs := &docCache{base: in.BaseFS, head: in.HeadFS, parsed: map[string]*docPair{}}
	// The Agent targets that changed, by host: a Gateway or Knowledge
	// target of the host lists their publications.
	agents := map[string][]agentTarget{}
	for _, tp := range p.Changed {
		k := [2]string{tp.Host, tp.ServiceID}
		if o, n := oldT[k], newT[k]; tp.Audience == bundle.AudienceAgent && (o != nil || n != nil) {
			agents[tp.Host] = append(agents[tp.Host], agentTarget{o: o, n: n})
		}
	}
	for _, tp := range p.Changed {
		k := [2]string{tp.Host, tp.ServiceID}
		t, err := buildTarget(tp, oldT[k], newT[k], docs)
		if err != nil {
			return nil, fmt.Errorf("plan %s/%s: %w", tp.Host, tp.ServiceID, err)
		}
		if t.Change == bundle.ChangeChanged && tp.Audience != bundle.AudienceAgent {
			if err := bindingCauses(&t, oldT[k], newT[k], agents[tp.Host], docs); err != nil {
				return nil, fmt.Errorf("plan %s/%s: %w", tp.Host, tp.ServiceID, err)
			}
		}
		r.Changed = append(r.Changed, t)
	}
	return r, nil
}

// agentTarget is a changed Agent target in the base (o) and the new
// compile (n); one of them is nil for an added or retired target.
type agentTarget struct{ o, n *compiler.Target }

// bindingCauses adds to t, a changed Gateway or Knowledge target, the
// Target documents of its host's Agents that changed which publications
// it accepts for them: an Agent's Target document is no input of the
// Gateway's or Knowledge service's artifact, yet its edit (settings, lease
// profile), addition or removal publishes the Agent again, so the
// acceptedPublications it lists change — and the plan named no cause.
func bindingCauses(t *Target, o, n *compiler.Target, agents []agentTarget, docs *docCache) error {
	oldPubs, err := acceptedByAgent(o)
	if err != nil {
		return err
	}
	newPubs, err := acceptedByAgent(n)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, c := range t.Because {
		have[c.File] = true
	}
	for _, a := range agents {
		ref := a.n
		if ref == nil {
			ref = a.o
		}
		name := ref.SubjectName
		op, inOld := oldPubs[name]
		np, inNew := newPubs[name]
		if (!inOld && !inNew) || op == np {
			continue // not bound here, or its publications are the same
		}
		var oi, ni map[string]string
		if a.o != nil {
			oi = a.o.InputDigests
		}
		if a.n != nil {
			ni = a.n.InputDigests
		}
		for _, f := range changedInputs(oi, ni) {
			d := docs.get(f)
			if d.kind != compiler.KindTarget || have[f] {
				continue
			}
			have[f] = true
			c := Cause{Kind: d.kind, Name: d.name, File: f, Change: "changed"}
			switch {
			case oi[f] == "":
				c.Change = "added"
			case ni[f] == "":
				c.Change = "removed"
			}
			if cs := d.changes(); len(cs) > 0 {
				c.Line = cs[0].line
			}
			t.Because = append(t.Because, c)
		}
	}
	sort.SliceStable(t.Because, func(i, j int) bool { return t.Because[i].File < t.Because[j].File })
	return nil
}

// acceptedByAgent returns the canonical JSON of each Agent's publications
// in the acceptedPublications of a Gateway or Knowledge target's namespace
// (t nil: none).
func acceptedByAgent(t *compiler.Target) (map[string]string, error) {
	out := map[string]string{}
	if t == nil {
		return out, nil
	}
	var ns render.Value
	if err := ns.UnmarshalJSON(t.Namespace); err != nil {
		return nil, fmt.Errorf("read the namespace: %w", err)
	}
	l := ns.Get("acceptedPublications")
	if l == nil || l.Kind != render.KindList {
		return out, nil
	}
	for _, it := range l.Items {
		a := it.Get("agent")
		if a == nil || a.Kind != render.KindString {
			continue
		}
		b, err := canonical(it.Get("publications"))
		if err != nil {
			return nil, err
		}
		out[a.Str] = string(b)
	}
	return out, nil
}

// rolloutChanges compares two rollout policies member by member.
func rolloutChanges(base, head *bundle.Rollout) ([]ValueChange, error) {
	var out []ValueChange
	for _, m := range []struct {
		path     string
		old, new any
		zero     func(*bundle.Rollout) bool
	}{
		{"activation", base.Activation, head.Activation, func(r *bundle.Rollout) bool { return r.Activation == "" }},
		{"freezeWindows", base.FreezeWindows, head.FreezeWindows, func(r *bundle.Rollout) bool { return len(r.FreezeWindows) == 0 }},
		{"healthGate", base.HealthGate, head.HealthGate, func(r *bundle.Rollout) bool { return r.HealthGate == nil }},
	} {
		var c ValueChange
		c.Path = m.path
		var err error
		if !m.zero(base) {
			if c.Old, err = json.Marshal(m.old); err != nil {
				return nil, fmt.Errorf("plan: rollout %s: %w", m.path, err)
			}
		}
		if !m.zero(head) {
			if c.New, err = json.Marshal(m.new); err != nil {
				return nil, fmt.Errorf("plan: rollout %s: %w", m.path, err)
			}
		}
		if string(c.Old) != string(c.New) {
			out = append(out, c)
		}
	}
	return out, nil
}

func buildTarget(tp compiler.TargetPlan, o, n *compiler.Target, docs *docCache) (Target, error) {
	t := Target{TargetPlan: tp}
	ref := n
	if ref == nil {
		ref = o
	}
	t.SubjectKind, t.SubjectName = ref.SubjectKind, ref.SubjectName
	if o == nil || n == nil {
		// Added or retired: name where the target is (was) declared; its
		// whole configuration is not printed.
		for _, f := range sortedKeys(ref.InputDigests) {
			if d := docs.get(f); d.kind == compiler.KindTarget {
				t.Declared = f
				break
			}
		}
		return t, nil
	}
	// The source documents that changed between the two compiles.
	var changes []sourceChange
	for _, f := range changedInputs(o.InputDigests, n.InputDigests) {
		d := docs.get(f)
		c := Cause{Kind: d.kind, Name: d.name, File: f, Change: "changed"}
		switch {
		case o.InputDigests[f] == "":
			c.Change = "added"
		case n.InputDigests[f] == "":
			c.Change = "removed"
		}
		cs := d.changes()
		if len(cs) > 0 {
			c.Line = cs[0].line
		}
		changes = append(changes, cs...)
		if d.kind == compiler.KindTarget || (d.kind == ref.SubjectKind && d.name == ref.SubjectName) {
			continue
		}
		t.Because = append(t.Because, c)
	}
	values, err := valueChanges(tp, o, n)
	if err != nil {
		return t, err
	}
	for i := range values {
		values[i].Source = attribute(&values[i], changes)
	}
	t.Values = values
	return t, nil
}

// changedInputs lists, sorted, the input files whose digest differs.
func changedInputs(a, b map[string]string) []string {
	set := map[string]bool{}
	for f, d := range a {
		if b[f] != d {
			set[f] = true
		}
	}
	for f, d := range b {
		if a[f] != d {
			set[f] = true
		}
	}
	return sortedKeys(set)
}

// attribute returns the file:line of the one source change whose old and
// new values are exactly those of v ("" when none or several files match).
func attribute(v *ValueChange, changes []sourceChange) string {
	found := ""
	for _, c := range changes {
		if string(c.old) == string(v.Old) && string(c.new) == string(v.New) {
			loc := c.file + ":" + strconv.Itoa(c.line)
			if found != "" && found != loc {
				return ""
			}
			found = loc
		}
	}
	return found
}

// valueChanges resolves every changed path of tp in both targets.
func valueChanges(tp compiler.TargetPlan, o, n *compiler.Target) ([]ValueChange, error) {
	ns := "/" + bundle.Namespace(tp.Audience)
	parse := func(b []byte) (*render.Value, error) {
		var v render.Value
		if err := v.UnmarshalJSON(b); err != nil {
			return nil, err
		}
		return &v, nil
	}
	oNS, err := parse(o.Namespace)
	if err != nil {
		return nil, err
	}
	nNS, err := parse(n.Namespace)
	if err != nil {
		return nil, err
	}
	oPS, err := parse(o.PropertySet)
	if err != nil {
		return nil, err
	}
	nPS, err := parse(n.PropertySet)
	if err != nil {
		return nil, err
	}
	var out []ValueChange
	for kind, paths := range [][]string{tp.Modified, tp.Added, tp.Removed} {
		for _, p := range paths {
			a, b := oPS, nPS
			rest := p
			if p == ns || strings.HasPrefix(p, ns+"/") {
				a, b, rest = oNS, nNS, strings.TrimPrefix(p, ns)
			}
			segs := pointerSegments(rest)
			vc := ValueChange{Path: p}
			ov, nv := lookup(a, segs), lookup(b, segs)
			// An added path has no old value and a removed one no new
			// value, even where the position holds another item of a
			// list compared by key.
			switch kind {
			case 1:
				ov = nil
			case 2:
				nv = nil
			}
			if vc.Old, err = canonical(ov); err != nil {
				return nil, err
			}
			if vc.New, err = canonical(nv); err != nil {
				return nil, err
			}
			vc.Reordered = render.Reordered(ov, nv)
			if ov != nil && nv != nil && ov.Kind == render.KindString && nv.Kind == render.KindString &&
				(len(ov.Str) > longString || len(nv.Str) > longString || strings.Contains(ov.Str+nv.Str, "\n")) &&
				len(ov.Str)+len(nv.Str) <= maxDiffTextLength {
				vc.Diff = unifiedDiff(ov.Str, nv.Str, diffContext)
			}
			out = append(out, vc)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func canonical(v *render.Value) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := render.Canonical(v)
	return json.RawMessage(b), err
}

// pointerSegments splits a JSON pointer ("" is the whole document).
func pointerSegments(p string) []string {
	if p == "" {
		return nil
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return segs
}

func lookup(v *render.Value, segs []string) *render.Value {
	for _, s := range segs {
		if v == nil {
			return nil
		}
		switch v.Kind {
		case render.KindMap:
			v = v.Get(s)
		case render.KindList:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(v.Items) {
				return nil
			}
			v = v.Items[i]
		default:
			return nil
		}
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// docCache parses each source file of both trees once.
type docCache struct {
	base, head fs.FS
	parsed     map[string]*docPair
}

// docPair is one source file in the base and the head tree.
type docPair struct {
	file       string
	kind, name string
	old, new   *yamlstrict.Doc
	diffed     []sourceChange
	done       bool
}

func (c *docCache) get(file string) *docPair {
	if d := c.parsed[file]; d != nil {
		return d
	}
	d := &docPair{file: file}
	read := func(fsys fs.FS) *yamlstrict.Doc {
		if fsys == nil {
			return nil
		}
		b, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil
		}
		doc, err := yamlstrict.Parse(file, b)
		if err != nil {
			return nil
		}
		return doc
	}
	d.old, d.new = read(c.base), read(c.head)
	for _, doc := range []*yamlstrict.Doc{d.new, d.old} {
		if doc != nil {
			d.kind, d.name = doc.Value.Get("kind").Str, doc.Value.Get("metadata").Get("name").Str
			break
		}
	}
	c.parsed[file] = d
	return d
}

// sourceChange is one changed field of a source document.
type sourceChange struct {
	file     string
	line     int
	field    string
	old, new json.RawMessage
}

// changes diffs the two versions of the document field by field.
func (d *docPair) changes() []sourceChange {
	if d.done {
		return d.diffed
	}
	d.done = true
	var ov, nv *render.Value
	if d.old != nil {
		ov = d.old.Value
	}
	if d.new != nil {
		nv = d.new.Value
	}
	d.walk(nil, ov, nv)
	return d.diffed
}

func (d *docPair) walk(path []string, a, b *render.Value) {
	if len(d.diffed) >= maxSourceChanges {
		return
	}
	switch {
	case a == nil && b == nil:
		return
	case a != nil && b != nil && a.Kind == render.KindMap && b.Kind == render.KindMap:
		keys := map[string]bool{}
		for _, k := range a.Keys {
			keys[k] = true
		}
		for _, k := range b.Keys {
			keys[k] = true
		}
		// Source order of the new document first, then removed keys.
		var order []string
		for _, k := range b.Keys {
			order = append(order, k)
			delete(keys, k)
		}
		order = append(order, sortedKeys(keys)...)
		for _, k := range order {
			d.walk(append(path[:len(path):len(path)], k), a.Get(k), b.Get(k))
		}
		return
	case a != nil && b != nil && a.Kind == render.KindList && b.Kind == render.KindList && !render.Reordered(a, b):
		for i := 0; i < len(a.Items) || i < len(b.Items); i++ {
			var x, y *render.Value
			if i < len(a.Items) {
				x = a.Items[i]
			}
			if i < len(b.Items) {
				y = b.Items[i]
			}
			d.walk(append(path[:len(path):len(path)], "["+strconv.Itoa(i)+"]"), x, y)
		}
		return
	}
	oc, _ := canonical(a)
	nc, _ := canonical(b)
	if string(oc) == string(nc) {
		return
	}
	doc := d.new
	if b == nil || doc == nil {
		doc = d.old
	}
	d.diffed = append(d.diffed, sourceChange{file: d.file, line: doc.Line(path...), field: yamlstrict.FieldPath(path), old: oc, new: nc})
}
