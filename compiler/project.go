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
	return &projector{list: l, root: root}, nil
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
		out := render.Map()
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
		out := render.List()
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
// forbidden list, or "".
func (p *projector) forbidden(v *render.Value) string {
	bad := map[string]bool{}
	for _, f := range p.list.Forbidden {
		bad[f] = true
	}
	var walk func(v *render.Value, path string) string
	walk = func(v *render.Value, path string) string {
		switch v.Kind {
		case render.KindMap:
			for i, k := range v.Keys {
				if bad[k] {
					return path + "/" + k
				}
				if r := walk(v.Vals[i], path+"/"+k); r != "" {
					return r
				}
			}
		case render.KindList:
			for i, it := range v.Items {
				if r := walk(it, path+"/"+itoa(i)); r != "" {
					return r
				}
			}
		}
		return ""
	}
	return walk(v, "")
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
