package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"

	"github.com/configpub/configpub/internal/jcs"
)

// canonicalDigest returns "sha256:" + hex(SHA-256(RFC 8785 bytes of v)) for
// the JSON-compatible values parseValues produces (map[string]any, []any,
// string, int64, float64, bool, nil). It writes the canonical form directly
// instead of going through encoding/json and a re-parse, which is most of
// the cost of a Load; TestCanonicalMatchesJCS holds it byte-identical to
// internal/jcs.
func canonicalDigest(v any) (string, error) {
	b, err := appendCanonical(make([]byte, 0, 4096), v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return jcs.DigestPrefix + hex.EncodeToString(sum[:]), nil
}

func appendCanonical(b []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case string:
		return appendString(b, x), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float64:
		s, err := gojcs.NumberToJSON(x)
		if err != nil {
			return nil, fmt.Errorf("canonical number: %w", err)
		}
		return append(b, s...), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendCanonical(b, x[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("canonical: unsupported value of type %T", v)
}

// appendString writes s as RFC 8785 does: only '"', '\\' and control
// characters are escaped (\b \f \n \r \t by name, others as \u00xx); every
// other character, including non-ASCII, is written as UTF-8.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			const hexDigits = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// compareUTF16 orders object keys by their UTF-16 code units (RFC 8785
// §3.2.3). Without supplementary-plane characters that order is the UTF-8
// byte order.
func compareUTF16(a, b string) int {
	if !hasSupplementary(a) && !hasSupplementary(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func hasSupplementary(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xF0 {
			r, _ := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				return true
			}
		}
	}
	return false
}
