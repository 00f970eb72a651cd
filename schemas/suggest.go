package schemas

import (
	"sort"
	"strconv"
	"strings"
)

// msgUnknownField is the message of a member the schema does not allow.
const msgUnknownField = "unknown field"

// IsUnknownField reports whether a Problem's message says that the schema
// does not allow the member at its path (with or without a did-you-mean).
// Such a message names the member, never its value.
func IsUnknownField(msg string) bool {
	return msg == msgUnknownField || strings.HasPrefix(msg, msgUnknownField+" (")
}

// suggestFields adds a did-you-mean to each unknown-field problem whose name
// is close to a member the schema allows at that location.
func (s *Set) suggestFields(name string, probs []Problem) {
	doc := s.flat[name]
	for i := range probs {
		p := &probs[i]
		if p.Message != msgUnknownField || len(p.Path) == 0 {
			continue
		}
		allowed := propertyNames(doc, p.Path[:len(p.Path)-1])
		if m := Closest(p.Path[len(p.Path)-1], allowed); m != "" {
			p.Message = msgUnknownField + " (did you mean " + strconv.Quote(m) + "?)"
		}
	}
}

// propertyNames returns the member names a schema allows at an instance
// location, following properties, items, additionalProperties and allOf.
func propertyNames(node any, path []string) []string {
	m, ok := node.(map[string]any)
	if !ok {
		return nil
	}
	if len(path) == 0 {
		var out []string
		if props, ok := m["properties"].(map[string]any); ok {
			for k := range props {
				out = append(out, k)
			}
		}
		for _, kw := range []string{"allOf", "oneOf", "anyOf"} {
			if list, ok := m[kw].([]any); ok {
				for _, b := range list {
					out = append(out, propertyNames(b, nil)...)
				}
			}
		}
		sort.Strings(out)
		return out
	}
	seg, rest := path[0], path[1:]
	var out []string
	if props, ok := m["properties"].(map[string]any); ok {
		if child, ok := props[seg]; ok {
			out = append(out, propertyNames(child, rest)...)
		}
	}
	if _, err := strconv.Atoi(seg); err == nil {
		if items, ok := m["items"]; ok {
			out = append(out, propertyNames(items, rest)...)
		}
	}
	if ap, ok := m["additionalProperties"].(map[string]any); ok {
		out = append(out, propertyNames(ap, rest)...)
	}
	for _, kw := range []string{"allOf", "oneOf", "anyOf"} {
		if list, ok := m[kw].([]any); ok {
			for _, b := range list {
				out = append(out, propertyNames(b, path)...)
			}
		}
	}
	return out
}

// Closest returns the candidate nearest to name when it is near enough to
// be a likely typo (edit distance at most a third of the length, at least
// 1, or a case-only difference), else "". Ties go to the smallest name.
func Closest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := len(name) / 3
	if limit < 1 {
		limit = 1
	}
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	for _, c := range sorted {
		if c == name {
			continue
		}
		d := distance(lower(name), lower(c))
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// distance is the optimal-string-alignment distance between a and b
// (bytes): insertions, deletions, substitutions and adjacent transpositions
// each cost 1.
func distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
