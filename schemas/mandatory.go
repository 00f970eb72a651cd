package schemas

import (
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// expandMissing replaces each "missing required property" problem whose
// schema requires members of its own by the full list of mandatory leaf
// properties below it, so a document missing a whole section reports every
// mandatory name it lacks (bounded by the caller).
func expandMissing(root *jsonschema.Schema, probs []Problem) []Problem {
	var out []Problem
	for _, p := range probs {
		if p.Message != msgMissing {
			out = append(out, p)
			continue
		}
		sch := at(root, p.Path)
		leaves := requiredLeaves(sch, p.Path, 0)
		if len(leaves) == 0 {
			out = append(out, p)
			continue
		}
		for _, l := range leaves {
			out = append(out, Problem{Path: l, Message: msgMissing})
		}
	}
	return out
}

const msgMissing = "missing required property"

// at returns the schema that applies to instance path (object members only).
func at(s *jsonschema.Schema, path []string) *jsonschema.Schema {
	for _, seg := range path {
		s = member(s, seg)
		if s == nil {
			return nil
		}
	}
	return s
}

func member(s *jsonschema.Schema, name string) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	if c, ok := s.Properties[name]; ok {
		return c
	}
	if s.Ref != nil {
		if c := member(s.Ref, name); c != nil {
			return c
		}
	}
	for _, a := range s.AllOf {
		if c := member(a, name); c != nil {
			return c
		}
	}
	return nil
}

func required(s *jsonschema.Schema) []string {
	if s == nil {
		return nil
	}
	req := append([]string(nil), s.Required...)
	if s.Ref != nil {
		req = append(req, required(s.Ref)...)
	}
	for _, a := range s.AllOf {
		req = append(req, required(a)...)
	}
	sort.Strings(req)
	return req
}

func requiredLeaves(s *jsonschema.Schema, path []string, depth int) [][]string {
	if s == nil || depth > 8 {
		return nil
	}
	var out [][]string
	req := required(s)
	for i, r := range req {
		if i > 0 && req[i-1] == r {
			continue
		}
		p := append(path[:len(path):len(path)], r)
		sub := requiredLeaves(member(s, r), p, depth+1)
		if len(sub) == 0 {
			out = append(out, p)
		} else {
			out = append(out, sub...)
		}
	}
	return out
}
