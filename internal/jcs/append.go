package jcs

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"
)

// MaxSafeInteger is 2^53, the largest integer magnitude with an exact IEEE
// 754 double (and so RFC 8785) form.
const MaxSafeInteger = 1 << 53

// AppendValue appends the RFC 8785 canonical bytes of v to dst. v is a value
// as gopkg.in/yaml.v3 or encoding/json decode into an `any`: nil, bool,
// string, float64, int, int64, uint64, json.Number, []any and map[string]any
// (nested to any depth). It writes the canonical form directly, without the
// encode / re-parse round trip of Canonical, and is byte-identical to
// Canonical on every value it accepts (TestAppendValueMatchesReference,
// FuzzAppendValueMatchesReference).
//
// It is stricter than Canonical where Canonical would silently change the
// data: a string that is not valid UTF-8 (Canonical substitutes U+FFFD), an
// integer beyond ±MaxSafeInteger (Canonical rounds it to a double) and a
// non-finite float are refused, as is any other Go type.
func AppendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return AppendString(dst, x)
	case int:
		return appendInt(dst, int64(x))
	case int64:
		return appendInt(dst, x)
	case uint64:
		if x > MaxSafeInteger {
			return dst, fmt.Errorf("jcs: integer %d has no exact JSON equivalent (beyond ±2^53)", x)
		}
		return strconv.AppendUint(dst, x, 10), nil
	case float64:
		return appendFloat(dst, x)
	case json.Number:
		return appendNumber(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendValue(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, CompareKeys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendString(dst, k); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = AppendValue(dst, x[k]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("jcs: unsupported value of type %T", v)
}

func appendInt(dst []byte, i int64) ([]byte, error) {
	if i > MaxSafeInteger || i < -MaxSafeInteger {
		return dst, fmt.Errorf("jcs: integer %d has no exact JSON equivalent (beyond ±2^53)", i)
	}
	return strconv.AppendInt(dst, i, 10), nil
}

func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("jcs: number %v has no JSON equivalent", f)
	}
	s, err := gojcs.NumberToJSON(f)
	if err != nil {
		return dst, fmt.Errorf("jcs: number %v: %w", f, err)
	}
	return append(dst, s...), nil
}

// appendNumber writes a JSON number text as the double it denotes, as
// Canonical does.
func appendNumber(dst []byte, n json.Number) ([]byte, error) {
	s := string(n)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) || s[len(s)-1] < '0' || s[len(s)-1] > '9' || !json.Valid([]byte(s)) {
		return dst, fmt.Errorf("jcs: invalid number literal %q", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return dst, fmt.Errorf("jcs: number %s: %w", s, err)
	}
	return appendFloat(dst, f)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as an RFC 8785 JSON string (section 3.2.2.2): only '"',
// '\\' and control characters are escaped (\b \f \n \r \t by name, the others
// as \u00xx); every other character, non-ASCII included, is written as UTF-8.
// A string that is not valid UTF-8 is refused (the error does not quote it:
// it may be a configuration value).
func AppendString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, errors.New("jcs: string is not valid UTF-8")
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}

// CompareKeys orders object member names by their UTF-16 code units (RFC 8785
// section 3.2.3), for slices.SortFunc. UTF-8 byte order equals code point order,
// which differs from UTF-16 order only when a supplementary character meets
// one in U+E000..U+FFFF.
func CompareKeys(a, b string) int {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		if a[i] < utf8.RuneSelf && b[j] < utf8.RuneSelf {
			if a[i] != b[j] {
				return int(a[i]) - int(b[j])
			}
			i++
			j++
			continue
		}
		ra, na := utf8.DecodeRuneInString(a[i:])
		rb, nb := utf8.DecodeRuneInString(b[j:])
		if ra != rb {
			// Two supplementary characters can share a high surrogate:
			// compare both units.
			ah, al := utf16Units(ra)
			bh, bl := utf16Units(rb)
			if ah != bh {
				return int(ah) - int(bh)
			}
			return int(al) - int(bl)
		}
		i += na
		j += nb
	}
	return len(a) - len(b)
}

// utf16Units returns the UTF-16 code units of r; lo is 0 for a character of
// the Basic Multilingual Plane.
func utf16Units(r rune) (hi, lo uint16) {
	if r >= 0x10000 {
		h, l := utf16.EncodeRune(r)
		return uint16(h), uint16(l)
	}
	return uint16(r), 0
}
