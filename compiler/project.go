package compiler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/schemas"
)

// projector copies the allowlisted parts of an effective policy into an
// audience namespace (compile step 3). It is built once per audience from
// the allowlist data in package schemas.
type projector struct {
	list *schemas.Allowlist
	root *trie
	bad  map[string]bool // the allowlist's forbidden member names
}

type trie struct {
	keep     bool // the whole subtree is allowed
	children map[string]*trie
	any      *trie // "*"
}

func newProjector(audience string) (*projector, error) {
	l, err := schemas.LoadAllowlist(audience)
	if err != nil {
		return nil, err
	}
	root := &trie{children: map[string]*trie{}}
	for _, p := range l.Allow {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("allowlist %s: pattern %q is not a JSON pointer", audience, p)
		}
		n := root
		for _, seg := range strings.Split(p[1:], "/") {
			var next *trie
			if seg == "*" {
				if n.any == nil {
					n.any = &trie{children: map[string]*trie{}}
				}
				next = n.any
			} else {
				if n.children[seg] == nil {
					n.children[seg] = &trie{children: map[string]*trie{}}
				}
				next = n.children[seg]
			}
			n = next
		}
		n.keep = true
	}
	bad := map[string]bool{}
	for _, f := range l.Forbidden {
		bad[f] = true
	}
	return &projector{list: l, root: root, bad: bad}, nil
}

// project returns the allowlisted copy of v; nil when nothing is allowed.
func (p *projector) project(v *render.Value) *render.Value {
	return projectNode(v, p.root)
}

// projectNode shares allowed subtrees with the policy instead of copying
// them: policy trees are immutable once frozen, and the namespace is only
// ever extended at its root.
func projectNode(v *render.Value, t *trie) *render.Value {
	if t.keep {
		return v
	}
	switch v.Kind {
	case render.KindMap:
		out := &render.Value{Kind: render.KindMap, Keys: make([]string, 0, len(v.Keys)), Vals: make([]*render.Value, 0, len(v.Keys))}
		for i, k := range v.Keys {
			ct := t.children[k]
			if ct == nil {
				ct = t.any
			}
			if ct == nil {
				continue
			}
			if c := projectNode(v.Vals[i], ct); c != nil {
				out.Add(k, c)
			}
		}
		return out
	case render.KindList:
		if t.any == nil {
			return nil
		}
		out := render.List(make([]*render.Value, 0, len(v.Items))...)
		for _, it := range v.Items {
			if c := projectNode(it, t.any); c != nil {
				out.Items = append(out.Items, c)
			}
		}
		return out
	}
	return nil
}

// forbidden returns the path of the first member named in the allowlist's
// forbidden list, or "". The path is only built for a member found.
func (p *projector) forbidden(v *render.Value) string {
	type segment struct {
		key   string
		index int // of a list item
		item  bool
	}
	var path []segment
	var walk func(v *render.Value) bool
	walk = func(v *render.Value) bool {
		switch v.Kind {
		case render.KindMap:
			for i, k := range v.Keys {
				path = append(path, segment{key: k})
				if p.bad[k] || walk(v.Vals[i]) {
					return true
				}
				path = path[:len(path)-1]
			}
		case render.KindList:
			for i, it := range v.Items {
				path = append(path, segment{index: i, item: true})
				if walk(it) {
					return true
				}
				path = path[:len(path)-1]
			}
		}
		return false
	}
	if !walk(v) {
		return ""
	}
	var b strings.Builder
	for _, s := range path {
		b.WriteByte('/')
		if s.item {
			b.WriteString(itoa(s.index))
		} else {
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// inventoryItem is one Knowledge control replica.
type inventoryItem = bundle.InventoryItem

func sortInventory(items []inventoryItem) {
	sort.Slice(items, func(i, j int) bool {
		if items[i].Kind != items[j].Kind {
			return items[i].Kind < items[j].Kind
		}
		return items[i].ID < items[j].ID
	})
}

func inventoryValue(items []inventoryItem) *render.Value {
	l := render.List()
	for _, it := range items {
		l.Items = append(l.Items, render.Map().
			Add("kind", render.String(it.Kind)).
			Add("id", render.String(it.ID)).
			Add("digest", render.String(it.Digest)))
	}
	return l
}

// acceptedValue renders accepted publications per agent.
func acceptedValue(names []string, pubs map[string][]bundle.Publication) *render.Value {
	l := render.List()
	for _, n := range names {
		pl := render.List()
		for _, p := range pubs[n] {
			pl.Items = append(pl.Items, render.Map().
				Add("publicationId", render.String(p.PublicationID)).
				Add("policyDigest", render.String(p.PolicyDigest)))
		}
		l.Items = append(l.Items, render.Map().Add("agent", render.String(n)).Add("publications", pl))
	}
	return l
}
