package render

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	gojcs "github.com/gowebpki/jcs"

	"github.com/configpub/configpub/internal/jcs"
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
func BytesDigest(b []byte) string { return jcs.BytesDigest(b) }

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
	case KindInt, KindFloat:
		return appendNumber(dst, v)
	case KindString:
		return jcs.AppendString(dst, v.Str)
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
			if dst, err = jcs.AppendString(dst, v.Keys[i]); err != nil {
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

// appendNumber writes an integer or float Value in its RFC 8785 form, which
// both renderers use: integers beyond ±2^53 and non-finite floats have no
// exact JSON equivalent and are refused.
func appendNumber(dst []byte, v *Value) ([]byte, error) {
	if v.Kind == KindInt {
		if v.Int > MaxSafeInt || v.Int < -MaxSafeInt {
			return dst, fmt.Errorf("integer %d has no exact JSON equivalent (beyond ±2^53)", v.Int)
		}
		return strconv.AppendInt(dst, v.Int, 10), nil
	}
	if math.IsNaN(v.Float) || math.IsInf(v.Float, 0) {
		return dst, fmt.Errorf("number %v has no JSON equivalent", v.Float)
	}
	s, err := gojcs.NumberToJSON(v.Float)
	if err != nil {
		return dst, err
	}
	return append(dst, s...), nil
}

// sortedIndex returns the indexes of keys in RFC 8785 order (UTF-16 code
// units, jcs.CompareKeys).
func sortedIndex(keys []string) []int {
	idx := make([]int, len(keys))
	sorted := true
	for i := range idx {
		idx[i] = i
		if i > 0 && jcs.CompareKeys(keys[i-1], keys[i]) > 0 {
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(idx, func(a, b int) int { return jcs.CompareKeys(keys[a], keys[b]) })
	}
	return idx
}
