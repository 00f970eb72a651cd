package render

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Decode stores v in the value dst points to as encoding/json stores v's
// RFC 8785 form, json.Unmarshal(Canonical(v), dst): the same fields set and
// the same refusals of what JSON cannot carry (integers beyond ±2^53,
// non-finite numbers, strings that are not UTF-8, a key twice in a map),
// without writing and parsing the JSON text. Struct members match fields by
// json tag, exactly and then case-insensitively; unknown members are
// ignored; null empties a pointer, slice, map or interface and leaves
// anything else alone. Types that decode themselves (json.Unmarshaler,
// encoding.TextUnmarshaler) and interface values take the JSON route for
// their part of v.
func Decode(v *Value, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("render: decode into %T: want a non-nil pointer", dst)
	}
	d := decoder{path: make([]string, 0, 16)}
	return d.value(v, rv.Elem())
}

// decoder walks a value and its destination together; path is the member
// path of the value being decoded, for messages.
type decoder struct{ path []string }

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonNumber      = reflect.TypeFor[json.Number]()
)

func (d *decoder) value(v *Value, rv reflect.Value) error {
	if v == nil {
		v = &Value{Kind: KindNull}
	}
	t := rv.Type()
	if t.Kind() == reflect.Interface || t == jsonNumber ||
		t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 || // base64 text in JSON
		t.Kind() != reflect.Pointer && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		return d.viaJSON(v, rv)
	}
	if v.Kind == KindNull {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			rv.SetZero()
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			rv.Set(reflect.New(t.Elem()))
		}
		return d.value(v, rv.Elem())
	case reflect.Struct:
		return d.object(v, rv)
	case reflect.Map:
		return d.mapOf(v, rv)
	case reflect.Slice:
		if v.Kind != KindList {
			return d.mismatch(v, t)
		}
		s := reflect.MakeSlice(t, len(v.Items), len(v.Items))
		for i, it := range v.Items {
			d.path = append(d.path, "["+strconv.Itoa(i)+"]")
			if err := d.value(it, s.Index(i)); err != nil {
				return err
			}
			d.path = d.path[:len(d.path)-1]
		}
		rv.Set(s)
		return nil
	case reflect.String:
		if v.Kind != KindString {
			return d.mismatch(v, t)
		}
		if !utf8.ValidString(v.Str) {
			return errNotUTF8
		}
		rv.SetString(v.Str)
		return nil
	case reflect.Bool:
		if v.Kind != KindBool {
			return d.mismatch(v, t)
		}
		rv.SetBool(v.Bool)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := d.integer(v, t)
		if err != nil {
			return err
		}
		if rv.OverflowInt(n) {
			return d.errorf("number %d overflows %s", n, t)
		}
		rv.SetInt(n)
		return nil
	case reflect.Float32, reflect.Float64:
		if v.Kind != KindInt && v.Kind != KindFloat {
			return d.mismatch(v, t)
		}
		f, err := finite(v)
		if err != nil {
			return err
		}
		if rv.OverflowFloat(f) {
			return d.errorf("number %v overflows %s", f, t)
		}
		rv.SetFloat(f)
		return nil
	}
	// Anything else (arrays, unsigned integers, channels…) is rare enough
	// to take the JSON route, which states its own rules.
	return d.viaJSON(v, rv)
}

// integer returns v as an integer of type t. A float with no fraction is
// accepted, as its RFC 8785 form ("3" for 3.0) is an integer literal.
func (d *decoder) integer(v *Value, t reflect.Type) (int64, error) {
	f, err := finite(v)
	if err != nil {
		return 0, err
	}
	switch v.Kind {
	case KindInt:
		return v.Int, nil
	case KindFloat:
		if f == math.Trunc(f) {
			if f >= -(1<<63) && f < 1<<63 {
				return int64(f), nil
			}
			return 0, d.errorf("number %v overflows %s", f, t)
		}
		return 0, d.errorf("number %v is not an integer (%s)", f, t)
	}
	return 0, d.mismatch(v, t)
}

// finite checks a number as AppendCanonical does and returns it as a
// float; for any other kind it returns 0 and no error.
func finite(v *Value) (float64, error) {
	switch v.Kind {
	case KindInt:
		if _, err := appendNumber(nil, v); err != nil {
			return 0, err
		}
		return float64(v.Int), nil
	case KindFloat:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return 0, fmt.Errorf("number %v has no JSON equivalent", v.Float)
		}
		return v.Float, nil
	}
	return 0, nil
}

var errNotUTF8 = errors.New("jcs: string is not valid UTF-8")

// object decodes a map into a struct.
func (d *decoder) object(v *Value, rv reflect.Value) error {
	if v.Kind != KindMap {
		return d.mismatch(v, rv.Type())
	}
	fs := fieldsOf(rv.Type())
	if fs.viaJSON {
		return d.viaJSON(v, rv)
	}
	if err := unique(v.Keys); err != nil {
		return err
	}
	// encoding/json reads members in document order, the RFC 8785 order
	// here, and a later member matching the same field wins. Only a member
	// matched case-insensitively can meet another on one field (keys are
	// unique), so the order is established only then.
	target := make([]int, len(v.Keys))
	folded := false
	for i, k := range v.Keys {
		target[i] = -1
		if f, ok := fs.exact[k]; ok {
			target[i] = f
			continue
		}
		for f, name := range fs.names {
			if strings.EqualFold(name, k) {
				target[i], folded = f, true
				break
			}
		}
	}
	visit := func(i int) error {
		k := v.Keys[i]
		if !utf8.ValidString(k) {
			return errNotUTF8
		}
		d.path = append(d.path, k)
		var err error
		if target[i] < 0 {
			err = check(v.Vals[i])
		} else {
			err = d.value(v.Vals[i], rv.Field(fs.index[target[i]]))
		}
		d.path = d.path[:len(d.path)-1]
		return err
	}
	if folded {
		for _, i := range sortedIndex(v.Keys) {
			if err := visit(i); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range v.Keys {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

// mapOf decodes a map into a Go map with string keys.
func (d *decoder) mapOf(v *Value, rv reflect.Value) error {
	t := rv.Type()
	if kt := t.Key(); kt.Kind() != reflect.String || reflect.PointerTo(kt).Implements(textUnmarshaler) {
		return d.viaJSON(v, rv)
	}
	if v.Kind != KindMap {
		return d.mismatch(v, t)
	}
	if err := unique(v.Keys); err != nil {
		return err
	}
	if rv.IsNil() {
		rv.Set(reflect.MakeMapWithSize(t, len(v.Keys)))
	}
	for i, k := range v.Keys {
		if !utf8.ValidString(k) {
			return errNotUTF8
		}
		d.path = append(d.path, k)
		e := reflect.New(t.Elem()).Elem()
		if err := d.value(v.Vals[i], e); err != nil {
			return err
		}
		rv.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), e)
		d.path = d.path[:len(d.path)-1]
	}
	return nil
}

// viaJSON decodes v into rv through its RFC 8785 text, as encoding/json
// would.
func (d *decoder) viaJSON(v *Value, rv reflect.Value) error {
	b, err := Canonical(v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, rv.Addr().Interface()); err != nil {
		return d.errorf("%v", err)
	}
	return nil
}

// check refuses, in a member no field takes, what Canonical refuses.
func check(v *Value) error {
	if v == nil {
		return nil
	}
	switch v.Kind {
	case KindInt, KindFloat:
		_, err := finite(v)
		return err
	case KindString:
		if !utf8.ValidString(v.Str) {
			return errNotUTF8
		}
	case KindList:
		for _, it := range v.Items {
			if err := check(it); err != nil {
				return err
			}
		}
	case KindMap:
		if err := unique(v.Keys); err != nil {
			return err
		}
		for i, k := range v.Keys {
			if !utf8.ValidString(k) {
				return errNotUTF8
			}
			if err := check(v.Vals[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// unique refuses a map with a key twice, as Canonical does. Maps parsed
// from YAML never have one; the check is for every other source of values.
func unique(keys []string) error {
	if len(keys) <= 16 {
		for i := 1; i < len(keys); i++ {
			for _, k := range keys[:i] {
				if k == keys[i] {
					return fmt.Errorf("duplicate key %q", k)
				}
			}
		}
		return nil
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if _, dup := seen[k]; dup {
			return fmt.Errorf("duplicate key %q", k)
		}
		seen[k] = struct{}{}
	}
	return nil
}

func (d *decoder) mismatch(v *Value, t reflect.Type) error {
	return d.errorf("cannot store a %s in a Go value of type %s", kindName(v.Kind), t)
}

func (d *decoder) errorf(format string, args ...any) error {
	return &DecodeError{Path: append([]string(nil), d.path...), Msg: fmt.Sprintf(format, args...)}
}

// DecodeError is a refusal by Decode at a member path of the value: keys,
// and "[i]" for list items (as the strict YAML reader locates them).
type DecodeError struct {
	Path []string
	Msg  string
}

func (e *DecodeError) Error() string {
	if len(e.Path) == 0 {
		return e.Msg
	}
	var b strings.Builder
	for _, p := range e.Path {
		if b.Len() > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String() + ": " + e.Msg
}

func kindName(k Kind) string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindInt, KindFloat:
		return "number"
	case KindString:
		return "string"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	}
	return fmt.Sprintf("value of kind %d", k)
}

// fields is how a struct type's members are found: by exact json name,
// then case-insensitively over names.
type fields struct {
	names   []string
	index   []int // struct field index of names[i]
	exact   map[string]int
	viaJSON bool // embedded structs or tag options this decoder leaves to encoding/json
}

// fieldCache holds fields by struct type (encoding/json keeps the same
// cache): a type's fields are worked out once per process.
var fieldCache sync.Map // reflect.Type -> *fields

func fieldsOf(t reflect.Type) *fields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fields)
	}
	fs := &fields{exact: map[string]int{}}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			fs.viaJSON = true
			continue
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "string") {
			fs.viaJSON = true
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := fs.exact[name]; dup {
			fs.viaJSON = true // encoding/json's rules for clashing names
		}
		fs.exact[name] = len(fs.names)
		fs.names = append(fs.names, name)
		fs.index = append(fs.index, i)
	}
	f, _ := fieldCache.LoadOrStore(t, fs)
	return f.(*fields)
}
