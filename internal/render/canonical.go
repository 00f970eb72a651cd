package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"
)

// Canonical returns the RFC 8785 canonical JSON bytes of v.
func Canonical(v *Value) ([]byte, error) {
	return AppendCanonical(make([]byte, 0, 1024), v)
}

// maxPooled is the largest buffer bufPool keeps (a release manifest's
// digest of many megabytes is not worth holding on to).
const maxPooled = 256 << 10

// bufPool recycles canonicalization buffers of Digest.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Digest returns "sha256:" + hex(SHA-256(Canonical(v))).
func Digest(v *Value) (string, error) {
	bp := bufPool.Get().(*[]byte)
	b, err := AppendCanonical((*bp)[:0], v)
	if err != nil {
		bufPool.Put(bp)
		return "", err
	}
	d := BytesDigest(b)
	if cap(b) <= maxPooled {
		*bp = b
		bufPool.Put(bp)
	}
	return d, nil
}

// BytesDigest returns "sha256:" + lowercase hex SHA-256 of b.
func BytesDigest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// AppendCanonical appends the RFC 8785 form of v to dst.
func AppendCanonical(dst []byte, v *Value) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	switch v.Kind {
	case KindNull:
		return append(dst, "null"...), nil
	case KindBool:
		if v.Bool {
			return append(dst, "true"...), nil
		}
		return append(dst, "false"...), nil
	case KindInt:
		if v.Int > MaxSafeInt || v.Int < -MaxSafeInt {
			return dst, fmt.Errorf("integer %d has no exact JSON equivalent (beyond ±2^53)", v.Int)
		}
		return strconv.AppendInt(dst, v.Int, 10), nil
	case KindFloat:
		if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
			return dst, fmt.Errorf("number %v has no JSON equivalent", v.Float)
		}
		s, err := gojcs.NumberToJSON(v.Float)
		if err != nil {
			return dst, err
		}
		return append(dst, s...), nil
	case KindString:
		return appendJSONString(dst, v.Str)
	case KindList:
		dst = append(dst, '[')
		for i, it := range v.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = AppendCanonical(dst, it); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case KindMap:
		order := sortedIndex(v.Keys)
		dst = append(dst, '{')
		for n, i := range order {
			if n > 0 {
				if v.Keys[order[n-1]] == v.Keys[i] {
					return dst, fmt.Errorf("duplicate key %q", v.Keys[i])
				}
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSONString(dst, v.Keys[i]); err != nil {
				return dst, err
			}
			dst = append(dst, ':')
			if dst, err = AppendCanonical(dst, v.Vals[i]); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("unknown value kind %d", v.Kind)
}

// sortedIndex returns the indexes of keys in RFC 8785 order (UTF-16 code
// units).
func sortedIndex(keys []string) []int {
	idx := make([]int, len(keys))
	sorted := true
	for i := range idx {
		idx[i] = i
		if i > 0 && compareUTF16(keys[i-1], keys[i]) > 0 {
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(idx, func(a, b int) int { return compareUTF16(keys[a], keys[b]) })
	}
	return idx
}

// compareUTF16 orders strings by their UTF-16 code units. UTF-8 byte order
// equals code point order, which differs from UTF-16 order only when a
// supplementary character meets one in U+E000..U+FFFF.
func compareUTF16(a, b string) int {
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
			return int(utf16Unit(ra)) - int(utf16Unit(rb))
		}
		i += na
		j += nb
	}
	return len(a) - len(b)
}

// utf16Unit returns the first UTF-16 code unit of r.
func utf16Unit(r rune) uint16 {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return uint16(hi)
	}
	return uint16(r)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as an RFC 8785 JSON string.
func appendJSONString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, fmt.Errorf("string is not valid UTF-8")
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
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
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
