package render

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Profile names the renderer profile written by YAML.
const Profile = "configpub-yaml/1"

// YAML renders map v as a configpub-yaml/1 document:
//
//   - block style, two-space indentation, members in the map's own order;
//   - keys plain when they are identifiers (letters, digits, "_", ".", "/",
//     "-", not starting with a digit or "-", not a YAML 1.1 boolean or null
//     word), double-quoted otherwise;
//   - every string double-quoted with JSON escapes, plus \u escapes for C1
//     controls, U+2028, U+2029 and U+FEFF; integers in decimal; floats in
//     their RFC 8785 form; empty maps "{}" and empty lists "[]";
//   - no document marker, LF line ends, a final newline.
func YAML(v *Value) ([]byte, error) {
	return AppendYAML(make([]byte, 0, 4096), v)
}

// AppendYAML appends the configpub-yaml/1 rendering of map v to dst.
func AppendYAML(dst []byte, v *Value) ([]byte, error) {
	if v == nil || v.Kind != KindMap {
		return dst, fmt.Errorf("render: document must be a map")
	}
	if len(v.Keys) == 0 {
		return append(dst, "{}\n"...), nil
	}
	return appendMap(dst, v, 0, false)
}

func appendIndent(dst []byte, n int) []byte {
	for ; n > 0; n-- {
		dst = append(dst, ' ')
	}
	return dst
}

// appendMap writes the members of m at indent; when inline is true the first
// member continues the current line (after "- ").
func appendMap(dst []byte, m *Value, indent int, inline bool) ([]byte, error) {
	var err error
	for i, k := range m.Keys {
		if i > 0 || !inline {
			dst = appendIndent(dst, indent)
		}
		if dst, err = appendKey(dst, k); err != nil {
			return dst, err
		}
		dst = append(dst, ':')
		val := m.Vals[i]
		switch {
		case val != nil && val.Kind == KindMap && len(val.Keys) > 0:
			dst = append(dst, '\n')
			dst, err = appendMap(dst, val, indent+2, false)
		case val != nil && val.Kind == KindList && len(val.Items) > 0:
			dst = append(dst, '\n')
			dst, err = appendList(dst, val, indent+2)
		default:
			dst = append(dst, ' ')
			dst, err = appendScalar(dst, val)
			dst = append(dst, '\n')
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func appendList(dst []byte, l *Value, indent int) ([]byte, error) {
	var err error
	for _, it := range l.Items {
		dst = appendIndent(dst, indent)
		dst = append(dst, '-')
		switch {
		case it != nil && it.Kind == KindMap && len(it.Keys) > 0:
			dst = append(dst, ' ')
			dst, err = appendMap(dst, it, indent+2, true)
		case it != nil && it.Kind == KindList && len(it.Items) > 0:
			dst = append(dst, '\n')
			dst, err = appendList(dst, it, indent+2)
		default:
			dst = append(dst, ' ')
			dst, err = appendScalar(dst, it)
			dst = append(dst, '\n')
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func appendScalar(dst []byte, v *Value) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	switch v.Kind {
	case KindNull:
		return append(dst, "null"...), nil
	case KindBool:
		return strconv.AppendBool(dst, v.Bool), nil
	case KindInt, KindFloat:
		return appendNumber(dst, v)
	case KindString:
		return appendQuoted(dst, v.Str)
	case KindMap:
		return append(dst, "{}"...), nil
	case KindList:
		return append(dst, "[]"...), nil
	}
	return dst, fmt.Errorf("unknown value kind %d", v.Kind)
}

func appendKey(dst []byte, k string) ([]byte, error) {
	if plainKey(k) {
		return append(dst, k...), nil
	}
	return appendQuoted(dst, k)
}

// plainKey reports whether k can be written unquoted and still read back as
// the same string under YAML 1.1 and 1.2 resolvers.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	c := k[0]
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/' || c == '-') {
			return false
		}
	}
	switch strings.ToLower(k) {
	case "y", "yes", "n", "no", "on", "off", "true", "false", "null":
		return false
	}
	return true
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes s as a YAML double-quoted scalar.
func appendQuoted(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, fmt.Errorf("string is not valid UTF-8")
	}
	dst = append(dst, '"')
	// Fast path: a run of printable ASCII other than '"' and '\\' is copied
	// as is.
	start := 0
	for start < len(s) {
		c := s[start]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			break
		}
		start++
	}
	dst = append(dst, s[:start]...)
	for _, r := range s[start:] {
		switch {
		case r == '"':
			dst = append(dst, '\\', '"')
		case r == '\\':
			dst = append(dst, '\\', '\\')
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029 || r == 0xfeff:
			dst = append(dst, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		default:
			dst = utf8.AppendRune(dst, r)
		}
	}
	return append(dst, '"'), nil
}
