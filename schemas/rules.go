package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Rules are the cross-field constraints JSON Schema cannot express, kept in
// the schema documents themselves as the extension keywords
// "x-configpub-equal" (pairs of JSON pointers whose values must be equal)
// and "x-configpub-order" ([pointer, "<"|"<=", pointer] over RFC 3339 UTC
// timestamps of one fixed format, so string order is time order).
type Rules struct {
	Equal [][2]string
	Order [][3]string
}

// RulesFor returns the rules declared in the named schema (e.g.
// "artifact/agent").
func RulesFor(name string) (*Rules, error) {
	b, err := files.ReadFile(name + ".json")
	if err != nil {
		return nil, fmt.Errorf("rules of %s: %w", name, err)
	}
	var doc struct {
		Equal [][2]string `json:"x-configpub-equal"`
		Order [][3]string `json:"x-configpub-order"`
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("rules of %s: %w", name, err)
	}
	return &Rules{Equal: doc.Equal, Order: doc.Order}, nil
}

// Check applies the rules to doc (map[string]any form). A missing operand is
// left to the schema's required checks.
func (r *Rules) Check(doc any) []Problem {
	var out []Problem
	for _, e := range r.Equal {
		a, okA := lookup(doc, e[0])
		b, okB := lookup(doc, e[1])
		if okA && okB && a != b {
			out = append(out, Problem{Path: split(e[1]), Message: fmt.Sprintf("must equal %s (%v), got %v", e[0], a, b)})
		}
	}
	for _, o := range r.Order {
		a, okA := lookup(doc, o[0])
		b, okB := lookup(doc, o[2])
		as, sa := a.(string)
		bs, sb := b.(string)
		if !okA || !okB || !sa || !sb {
			continue
		}
		ok := as < bs
		if o[1] == "<=" {
			ok = as <= bs
		}
		if !ok {
			out = append(out, Problem{Path: split(o[2]), Message: fmt.Sprintf("%s (%s) must be %s %s (%s)", o[0], as, o[1], o[2], bs)})
		}
	}
	return out
}

func split(ptr string) []string {
	if ptr == "" || ptr == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(ptr, "/"), "/")
}

func lookup(doc any, ptr string) (any, bool) {
	cur := doc
	for _, seg := range split(ptr) {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[seg]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}
