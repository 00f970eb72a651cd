package bundle

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/configpub/configpub/internal/yamlstrict"
)

// A shard as Files renders it is a handful of `key: "value"` lines and one
// canonical JSON array per row. Read through the YAML parser, a shard of a
// large release allocates some thirty times its size (the YAML node tree,
// the value tree, its canonical JSON, then the decoder's copy); most of a
// large release is rows. decodeShardRendered reads that exact form
// directly, and anything else goes to decodeStrict.
//
// It is sound by construction, not by testing alone: it accepts only
// printable ASCII, strings whose only escapes are \" and \\, integers in
// plain decimal within ±2^53, objects with strictly increasing keys, at
// most maxFastDepth levels of nesting and no whitespace inside a row —
// canonical JSON (RFC 8785) for which YAML's flow style means exactly what
// JSON means, and which internal/yamlstrict accepts as it is.

// maxFastDepth bounds the nesting of a row read by decodeShardRendered
// (yamlstrict allows more; a deeper row is read by decodeStrict).
const maxFastDepth = 16

// maxFastDigits keeps the integers read by decodeShardRendered below 2^53,
// beyond which yamlstrict refuses them.
const maxFastDigits = 15

// decodeShardRendered decodes b into a shard document when b is in the form
// Files renders (see above); ok is false for any other bytes, which
// decodeStrict then reads (and, if they are wrong, names what is wrong).
// Its rows' raw values share b.
func decodeShardRendered(b []byte) (sd shardDoc, ok bool) {
	if len(b) > yamlstrict.MaxFileSize {
		return sd, false
	}
	rest := b
	for _, h := range []struct {
		key string
		dst *string
	}{{"apiVersion", &sd.APIVersion}, {"kind", &sd.Kind}, {"envTag", &sd.EnvTag}, {"host", &sd.Host}, {"inputsDigest", &sd.InputsDigest}} {
		line, r, ok := nextLine(rest)
		if !ok || len(line) < len(h.key)+2 || string(line[:len(h.key)]) != h.key || string(line[len(h.key):len(h.key)+2]) != ": " {
			return sd, false
		}
		v := line[len(h.key)+2:]
		if end, ok := scanString(v, 0); !ok || end != len(v) {
			return sd, false
		}
		*h.dst = unquote(v)
		rest = r
	}
	for _, l := range []struct {
		key string
		dst *[][]json.RawMessage
	}{{"subjects", &sd.Subjects}, {"workflows", &sd.Workflows}, {"targets", &sd.Targets}} {
		line, r, ok := nextLine(rest)
		if !ok {
			return sd, false
		}
		rest = r
		rows := [][]json.RawMessage{}
		switch string(line) {
		case l.key + ": []":
		case l.key + ":":
			for bytes.HasPrefix(rest, []byte("  - ")) {
				if line, rest, ok = nextLine(rest); !ok {
					return sd, false
				}
				row, ok := splitRow(line[len("  - "):])
				if !ok {
					return sd, false
				}
				rows = append(rows, row)
			}
			if len(rows) == 0 {
				return sd, false // "key:" alone is null in YAML
			}
		default:
			return sd, false
		}
		*l.dst = rows
	}
	return sd, len(rest) == 0
}

// nextLine returns the line at the start of b without its '\n', and what
// follows it; ok is false when b has no complete line.
func nextLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, b, false
	}
	return b[:i], b[i+1:], true
}

// splitRow splits a row written as a canonical JSON array into its
// elements.
func splitRow(b []byte) ([]json.RawMessage, bool) {
	if len(b) < 2 || b[0] != '[' {
		return nil, false
	}
	row := []json.RawMessage{}
	end, ok := scanItems(b, 1, ']', func(i int) (int, bool) {
		end, ok := scanValue(b, i, 1)
		if ok {
			row = append(row, json.RawMessage(b[i:end:end]))
		}
		return end, ok
	})
	return row, ok && end == len(b)
}

// scanItems returns the end of the items of an array or object at b[i:]
// (just after its opening byte) up to its closing byte, each item read by
// item, which returns the item's end.
func scanItems(b []byte, i int, closing byte, item func(i int) (int, bool)) (int, bool) {
	if i < len(b) && b[i] == closing {
		return i + 1, true
	}
	for {
		end, ok := item(i)
		if !ok || end >= len(b) {
			return 0, false
		}
		switch b[end] {
		case ',':
			i = end + 1
		case closing:
			return end + 1, true
		default:
			return 0, false
		}
	}
}

// scanValue returns the end of the canonical JSON value at b[i:] (what is
// accepted is said at the top of this file); depth is the nesting level of
// that value.
func scanValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || depth > maxFastDepth {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '-' || c >= '0' && c <= '9':
		return scanInt(b, i)
	case c == '[':
		return scanItems(b, i+1, ']', func(i int) (int, bool) { return scanValue(b, i, depth+1) })
	case c == '{':
		var last []byte
		return scanItems(b, i+1, '}', func(i int) (int, bool) {
			kend, ok := scanString(b, i)
			if !ok || kend >= len(b) || b[kend] != ':' {
				return 0, false
			}
			key := b[i+1 : kend-1]
			// Strictly increasing keys: sorted as RFC 8785 sorts them (for
			// ASCII without escapes, byte order), and no duplicate.
			if bytes.IndexByte(key, '\\') >= 0 || last != nil && bytes.Compare(last, key) >= 0 {
				return 0, false
			}
			last = key
			return scanValue(b, kend+1, depth+1)
		})
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(b[i:], []byte(lit)) {
			return i + len(lit), true
		}
	}
	return 0, false
}

// scanString returns the end of the string at b[i:] (b[i] is '"'): printable
// ASCII, escaping only '"' and '\\'.
func scanString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) || b[i+1] != '"' && b[i+1] != '\\' {
				return 0, false
			}
			i++
		case c < 0x20 || c > 0x7e:
			return 0, false
		}
	}
	return 0, false
}

// scanInt returns the end of the integer at b[i:]: 0, or an optional '-'
// and at most maxFastDigits digits not starting with 0.
func scanInt(b []byte, i int) (int, bool) {
	start := i
	if b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n := i - digits
	switch {
	case n == 0 || n > maxFastDigits:
		return 0, false
	case b[digits] == '0' && (n > 1 || digits > start): // 01, -0
		return 0, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return 0, false
	}
	return i, true
}

// unquote returns the content of a string scanString accepted.
func unquote(b []byte) string {
	b = b[1 : len(b)-1]
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' {
			i++
		}
		out = append(out, b[i])
	}
	return string(out)
}

// decodeColumn decodes one column of a row into dst as json.Unmarshal
// would, reading a string written without escapes and a plain decimal
// integer directly.
func decodeColumn(raw json.RawMessage, dst any) error {
	switch d := dst.(type) {
	case *string:
		if end, ok := scanString(raw, 0); ok && end == len(raw) && bytes.IndexByte(raw, '\\') < 0 {
			*d = string(raw[1 : len(raw)-1])
			return nil
		}
	case *int64:
		if len(raw) == 0 {
			break
		}
		if end, ok := scanInt(raw, 0); ok && end == len(raw) {
			if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
				*d = n
				return nil
			}
		}
	}
	return json.Unmarshal(raw, dst)
}
