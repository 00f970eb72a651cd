package jcs

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

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
