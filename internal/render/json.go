package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
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
func (v *Value) ToAny() any { return (&AnyBuffer{once: true}).plain(v) }

// AnyBuffer converts values to their plain Go form (see Value.ToAny) into
// the maps and lists of its previous conversion, cleared: a caller that
// validates one document after another and keeps none of their plain forms
// allocates the containers once. The zero AnyBuffer is ready to use; it is
// not safe for concurrent use.
type AnyBuffer struct {
	maps  []map[string]any
	lists [][]any
	nm    int  // maps handed out by the conversion in progress
	nl    int  // lists handed out
	once  bool // converting once (Value.ToAny): nothing kept
}

// AnyBufferPool shares AnyBuffers between goroutines that convert values
// concurrently: each Gets a buffer, converts with it, and Puts it back once
// nothing refers to the plain form any more. The zero AnyBufferPool is
// ready to use and safe for concurrent use.
type AnyBufferPool struct{ p sync.Pool }

// Get returns a buffer of the pool, or a new one.
func (p *AnyBufferPool) Get() *AnyBuffer {
	if b, _ := p.p.Get().(*AnyBuffer); b != nil {
		return b
	}
	return new(AnyBuffer)
}

// Put returns b to the pool; the plain forms it made are invalid from now.
func (p *AnyBufferPool) Put(b *AnyBuffer) { p.p.Put(b) }

// maxReusedMap is the largest map an AnyBuffer clears for reuse: clearing
// costs its capacity, so a larger one is left to the collector.
const maxReusedMap = 64

// ToAny converts v as v.ToAny() does. The result, and every map and list in
// it, is valid until the next call.
func (b *AnyBuffer) ToAny(v *Value) any {
	b.nm, b.nl = 0, 0
	return b.plain(v)
}

func (b *AnyBuffer) plain(v *Value) any {
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
		m := b.nextMap(len(v.Keys))
		for i, k := range v.Keys {
			m[k] = b.plain(v.Vals[i])
		}
		return m
	case KindList:
		l := b.nextList(len(v.Items))
		for i, it := range v.Items {
			l[i] = b.plain(it)
		}
		return l
	}
	return nil
}

// nextMap returns an empty map, reused when the buffer has one.
func (b *AnyBuffer) nextMap(size int) map[string]any {
	if b.nm < len(b.maps) {
		m := b.maps[b.nm]
		b.nm++
		clear(m)
		return m
	}
	m := make(map[string]any, size)
	if !b.once && size <= maxReusedMap {
		b.maps = append(b.maps, m)
		b.nm++
	}
	return m
}

// nextList returns a list of n items for the caller to set, reused when
// the buffer has one large enough.
func (b *AnyBuffer) nextList(n int) []any {
	if b.nl < len(b.lists) && cap(b.lists[b.nl]) >= n {
		l := b.lists[b.nl][:n]
		b.nl++
		return l
	}
	l := make([]any, n)
	if b.once {
		return l
	}
	if b.nl < len(b.lists) {
		b.lists[b.nl] = l
	} else {
		b.lists = append(b.lists, l)
	}
	b.nl++
	return l
}
