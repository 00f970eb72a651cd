package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// MarshalJSON returns the canonical JSON form of v, so a *Value can sit in
// structs encoded with encoding/json.
func (v *Value) MarshalJSON() ([]byte, error) { return Canonical(v) }

// UnmarshalJSON reads JSON text into v keeping member order and telling
// integers (no fraction or exponent) from floats.
func (v *Value) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	out, err := decodeJSON(dec)
	if err != nil {
		return err
	}
	if _, err := dec.Token(); err == nil {
		return fmt.Errorf("trailing data after the json value")
	}
	*v = *out
	return nil
}

func decodeJSON(dec *json.Decoder) (*Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	t, ok := tok.(json.Delim)
	if !ok {
		return fromAny(tok) // null, boolean, string or number
	}
	switch t {
	case '{':
		m := Map()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			val, err := decodeJSON(dec)
			if err != nil {
				return nil, err
			}
			m.Add(k, val)
		}
		_, err := dec.Token()
		return m, err
	case '[':
		l := List()
		for dec.More() {
			val, err := decodeJSON(dec)
			if err != nil {
				return nil, err
			}
			l.Items = append(l.Items, val)
		}
		_, err := dec.Token()
		return l, err
	}
	return nil, fmt.Errorf("unexpected json token %v", tok)
}

// ToAny converts v to the plain Go form encoding/json produces (map[string]any,
// []any, string, bool, nil, json.Number), the input JSON Schema validators take.
func (v *Value) ToAny() any {
	if v == nil {
		return nil
	}
	switch v.Kind {
	case KindBool:
		return v.Bool
	case KindInt:
		return json.Number(strconv.FormatInt(v.Int, 10))
	case KindFloat:
		return json.Number(strconv.FormatFloat(v.Float, 'g', -1, 64))
	case KindString:
		return v.Str
	case KindMap:
		m := make(map[string]any, len(v.Keys))
		for i, k := range v.Keys {
			m[k] = v.Vals[i].ToAny()
		}
		return m
	case KindList:
		l := make([]any, len(v.Items))
		for i, it := range v.Items {
			l[i] = it.ToAny()
		}
		return l
	}
	return nil
}
