package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Marshal returns the RFC 8785 canonical JSON bytes of a Go value that
// encoding/json accepts (a struct, a map, a json.RawMessage), through the same
// encoder as Canonical: the value is encoded with encoding/json, read back
// into a value tree and written canonically. Like Canonical it refuses rather
// than alters an integer beyond ±2^53.
func Marshal(v any) ([]byte, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("canonical json: encode: %w", err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("canonical json: trailing data after the value")
	}
	tree, err := fromAny(x)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	b, err := AppendCanonical(make([]byte, 0, len(raw)), tree)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return b, nil
}

// fromAny converts what encoding/json decodes with UseNumber into a value
// tree.
func fromAny(x any) (*Value, error) {
	switch t := x.(type) {
	case nil:
		return Null(), nil
	case bool:
		return Bool(t), nil
	case string:
		return String(t), nil
	case json.Number:
		return number(string(t))
	case []any:
		l := &Value{Kind: KindList, Items: make([]*Value, len(t))}
		for i, e := range t {
			v, err := fromAny(e)
			if err != nil {
				return nil, err
			}
			l.Items[i] = v
		}
		return l, nil
	case map[string]any:
		m := &Value{Kind: KindMap, Keys: make([]string, 0, len(t)), Vals: make([]*Value, 0, len(t))}
		for k, e := range t {
			v, err := fromAny(e)
			if err != nil {
				return nil, err
			}
			m.Keys = append(m.Keys, k)
			m.Vals = append(m.Vals, v)
		}
		return m, nil
	}
	return nil, fmt.Errorf("unexpected json value of type %T", x)
}

// number reads a JSON number: an integer (no fraction or exponent) within
// ±2^53, or a float. An integer literal beyond ±2^53 is read as the float it
// names only when that float is exactly it (encoding/json writes a large
// float64 without exponent); otherwise it is refused, never rounded.
func number(s string) (*Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err == nil && i <= MaxSafeInt && i >= -MaxSafeInt {
			return Int(i), nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && strconv.FormatFloat(f, 'f', -1, 64) == s {
			return Float(f), nil
		}
		return nil, fmt.Errorf("integer %s has no exact JSON equivalent (beyond ±2^53)", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w", s, err)
	}
	return Float(f), nil
}
