package schemas

import (
	"fmt"
	"net/url"
	"strings"
)

// inlineRefs returns a copy of a schema document in which every
// {"$ref": …} node (with no sibling keywords other than annotations such as
// description) is replaced by a copy of its target, the node's annotations
// taking precedence, resolved against base and docs (URL without fragment -> document).
// The embedded schemas have no recursive references, so the result is
// finite; inlining spares the validator a reference hop per property, which
// dominates the cost of validating many small artifacts. The embedded files
// keep their $refs: they are the documented contract.
func inlineRefs(node any, base string, docs map[string]any, depth int) (any, error) {
	if depth > 32 {
		return nil, fmt.Errorf("schema references nest deeper than 32 levels at %s", base)
	}
	switch x := node.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok && onlyAnnotations(x) {
			target, targetBase, err := resolveRef(ref, base, docs)
			if err != nil {
				return nil, err
			}
			in, err := inlineRefs(target, targetBase, docs, depth+1)
			if err != nil || len(x) == 1 {
				return in, err
			}
			m, ok := in.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("$ref %q: target is not a schema object", ref)
			}
			for k, v := range x {
				if k != "$ref" {
					m[k] = v
				}
			}
			return m, nil
		}
		out := make(map[string]any, len(x))
		for k, v := range x {
			if k == "$id" || k == "$schema" {
				if depth > 0 {
					continue // an inlined document is no longer a resource of its own
				}
				out[k] = v
				continue
			}
			if k == "$defs" {
				continue
			}
			c, err := inlineRefs(v, base, docs, depth)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, v := range x {
			c, err := inlineRefs(v, base, docs, depth)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return node, nil
}

func resolveRef(ref, base string, docs map[string]any) (any, string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return nil, "", err
	}
	r, err := b.Parse(ref)
	if err != nil {
		return nil, "", fmt.Errorf("$ref %q: %w", ref, err)
	}
	frag := r.Fragment
	r.Fragment = ""
	doc, ok := docs[r.String()]
	if !ok {
		return nil, "", fmt.Errorf("$ref %q: unknown document %s", ref, r.String())
	}
	cur := doc
	if frag != "" {
		for _, seg := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, "", fmt.Errorf("$ref %q: no %s", ref, seg)
			}
			if cur, ok = m[seg]; !ok {
				return nil, "", fmt.Errorf("$ref %q: no %s", ref, seg)
			}
		}
	}
	return cur, r.String(), nil
}

// annotations are the keywords that do not affect validation; a $ref with
// only these beside it can be inlined.
var annotations = map[string]bool{"description": true, "title": true, "$comment": true, "examples": true, "default": true, "deprecated": true}

func onlyAnnotations(x map[string]any) bool {
	for k := range x {
		if k != "$ref" && !annotations[k] {
			return false
		}
	}
	return true
}
