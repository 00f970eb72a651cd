package render

import "sort"

// Kind is the JSON type of a Value.
type Kind uint8

// Kinds of values.
const (
	KindNull Kind = iota
	KindBool
	KindInt
	KindFloat
	KindString
	KindMap
	KindList
)

// MaxSafeInt is the largest integer magnitude with an exact JSON (IEEE 754
// double) equivalent, 2^53.
const MaxSafeInt = 1 << 53

// Value is one node of an ordered JSON-compatible tree. Map keys keep the
// order they were added in; that order is the rendered YAML order, while the
// canonical JSON form sorts them.
type Value struct {
	Kind  Kind
	Bool  bool
	Int   int64
	Float float64
	Str   string
	Keys  []string // KindMap
	Vals  []*Value // KindMap, parallel to Keys
	Items []*Value // KindList
}

// Null returns a null value.
func Null() *Value { return &Value{Kind: KindNull} }

// Bool returns a boolean value.
func Bool(b bool) *Value { return &Value{Kind: KindBool, Bool: b} }

// Int returns an integer value.
func Int(i int64) *Value { return &Value{Kind: KindInt, Int: i} }

// Float returns a float value.
func Float(f float64) *Value { return &Value{Kind: KindFloat, Float: f} }

// String returns a string value.
func String(s string) *Value { return &Value{Kind: KindString, Str: s} }

// Map returns an empty map.
func Map() *Value { return &Value{Kind: KindMap} }

// List returns a list of the given items.
func List(items ...*Value) *Value {
	if items == nil {
		items = []*Value{}
	}
	return &Value{Kind: KindList, Items: items}
}

// Strings returns a list of string values.
func Strings(ss []string) *Value {
	l := &Value{Kind: KindList, Items: make([]*Value, 0, len(ss))}
	for _, s := range ss {
		l.Items = append(l.Items, String(s))
	}
	return l
}

// Set appends key k with value v to map m, or replaces the value when k is
// already present. It returns m for chaining.
func (m *Value) Set(k string, v *Value) *Value {
	for i, key := range m.Keys {
		if key == k {
			m.Vals[i] = v
			return m
		}
	}
	m.Keys = append(m.Keys, k)
	m.Vals = append(m.Vals, v)
	return m
}

// Add appends key k without checking for an existing key; the caller
// guarantees uniqueness. It returns m for chaining.
func (m *Value) Add(k string, v *Value) *Value {
	m.Keys = append(m.Keys, k)
	m.Vals = append(m.Vals, v)
	return m
}

// Get returns the value of key k in map m, or nil.
func (m *Value) Get(k string) *Value {
	if m == nil || m.Kind != KindMap {
		return nil
	}
	for i, key := range m.Keys {
		if key == k {
			return m.Vals[i]
		}
	}
	return nil
}

// Delete removes key k from map m.
func (m *Value) Delete(k string) {
	for i, key := range m.Keys {
		if key == k {
			m.Keys = append(m.Keys[:i], m.Keys[i+1:]...)
			m.Vals = append(m.Vals[:i], m.Vals[i+1:]...)
			return
		}
	}
}

// Len returns the number of members of a map or items of a list.
func (m *Value) Len() int {
	switch m.Kind {
	case KindMap:
		return len(m.Keys)
	case KindList:
		return len(m.Items)
	}
	return 0
}

// Clone returns a deep copy of v.
func (v *Value) Clone() *Value {
	if v == nil {
		return nil
	}
	c := *v
	if v.Kind == KindMap {
		c.Keys = append([]string(nil), v.Keys...)
		c.Vals = make([]*Value, len(v.Vals))
		for i, x := range v.Vals {
			c.Vals[i] = x.Clone()
		}
	}
	if v.Kind == KindList {
		c.Items = make([]*Value, len(v.Items))
		for i, x := range v.Items {
			c.Items[i] = x.Clone()
		}
	}
	return &c
}

// SortKeys reorders map m's members by key (byte order) in place, not
// recursively, and returns m.
func (m *Value) SortKeys() *Value {
	idx := make([]int, len(m.Keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return m.Keys[idx[a]] < m.Keys[idx[b]] })
	keys := make([]string, len(idx))
	vals := make([]*Value, len(idx))
	for i, j := range idx {
		keys[i], vals[i] = m.Keys[j], m.Vals[j]
	}
	m.Keys, m.Vals = keys, vals
	return m
}
