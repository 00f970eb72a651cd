package yamlstrict

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"
	yaml "gopkg.in/yaml.v3"

	"github.com/configpub/configpub/internal/render"
)

// Limits applied to every document.
const (
	MaxDepth    = 64      // nesting levels of maps and lists
	MaxFileSize = 4 << 20 // bytes
)

// Doc is one parsed source document.
type Doc struct {
	File  string
	Node  *yaml.Node    // the document's root content node (positions)
	Value *render.Value // the same content as a JSON-compatible tree
}

// Parse reads exactly one YAML document from data and converts it strictly.
func Parse(file string, data []byte) (*Doc, error) { return parse(file, data, false) }

// ParseSource is Parse with the rules of policy sources that Parse, which
// also reads published artifacts (values.yml, release manifests), does not
// apply, so that a runtime never refuses a values.yml published before
// them: an integer literal beyond int64 (100000000000000000000), a float
// to yaml.v3, is refused as an integer beyond ±2^53.
func ParseSource(file string, data []byte) (*Doc, error) { return parse(file, data, true) }

func parse(file string, data []byte, source bool) (*Doc, error) {
	if len(data) > MaxFileSize {
		return nil, &Error{File: file, Line: 1, Msg: fmt.Sprintf("file is %d bytes, more than the %d allowed", len(data), MaxFileSize), Class: Syntax}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Line: 1, Msg: "empty document", Class: Syntax}
		}
		return nil, syntaxError(file, data, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: file, Line: extra.Line, Msg: "more than one yaml document in a file", Class: Syntax}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(file, data, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, &Error{File: file, Line: 1, Msg: "empty document", Class: Syntax}
	}
	n := root.Content[0]
	c := converter{file: file, source: source}
	v, err := c.convert(n, nil, 1)
	if err != nil {
		return nil, err
	}
	return &Doc{File: file, Node: n, Value: v}, nil
}

// ParseValue reads a single free-form YAML document into a value tree.
func ParseValue(file string, data []byte) (*render.Value, error) {
	d, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	return d.Value, nil
}

// syntaxError is the refusal of data that yaml.v3 could not read. Bytes
// that are not UTF-8 are located at the first one: yaml.v3 reports them at
// line 1 whatever their line. (A file starting with a UTF-16 byte order
// mark is UTF-16 to yaml.v3, and is left to it.)
func syntaxError(file string, data []byte, err error) *Error {
	if !bytes.HasPrefix(data, []byte{0xfe, 0xff}) && !bytes.HasPrefix(data, []byte{0xff, 0xfe}) && !utf8.Valid(data) {
		line, col, b := firstInvalidUTF8(data)
		return &Error{File: file, Line: line, Msg: fmt.Sprintf("invalid UTF-8 at column %d (byte 0x%02x): a source file must be UTF-8 text", col, b), Class: Syntax}
	}
	return &Error{File: file, Line: yamlErrLine(err), Msg: "invalid yaml: " + strings.TrimPrefix(err.Error(), "yaml: "), Class: Syntax}
}

// firstInvalidUTF8 returns the line and column (in characters, from 1) of
// the first byte of data that does not start a valid UTF-8 sequence, and
// the byte.
func firstInvalidUTF8(data []byte) (line, col int, b byte) {
	line, col = 1, 1
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return line, col, data[i]
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += n
	}
	return line, col, 0
}

// yamlErrLine extracts "line N" from a yaml.v3 error message.
func yamlErrLine(err error) int {
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		j := i + 5
		for j < len(msg) && msg[j] >= '0' && msg[j] <= '9' {
			j++
		}
		if n, err := strconv.Atoi(msg[i+5 : j]); err == nil {
			return n
		}
	}
	return 1
}

type converter struct {
	file   string
	source bool // ParseSource's rules
}

// maxPathShown bounds the field path of a message (deep nesting).
const maxPathShown = 12

func (c *converter) fail(n *yaml.Node, path []string, format string, args ...any) *Error {
	if len(path) > maxPathShown {
		path = append(path[:maxPathShown:maxPathShown], "…")
	}
	path = append([]string(nil), path...)
	return &Error{File: c.file, Line: n.Line, Field: FieldPath(path), Msg: fmt.Sprintf(format, args...)}
}

func (c *converter) duplicate(n *yaml.Node, path []string, first int) error {
	err := c.fail(n, path, "duplicate key (first at line %d)", first)
	err.Class = DuplicateKey
	return err
}

// FieldPath joins path segments as a.b[2].c; numeric segments are indexes.
func FieldPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		if p != "" && p[0] == '[' {
			b.WriteString(p)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func (c *converter) convert(n *yaml.Node, path []string, depth int) (*render.Value, error) {
	if depth > MaxDepth {
		return nil, c.fail(n, path, "nesting deeper than %d levels", MaxDepth)
	}
	if n.Kind == yaml.AliasNode {
		return nil, c.fail(n, path, "yaml aliases are not allowed")
	}
	if n.Anchor != "" {
		return nil, c.fail(n, path, "yaml anchors are not allowed (&%s)", n.Anchor)
	}
	switch n.Kind {
	case yaml.MappingNode:
		if n.Style&yaml.TaggedStyle != 0 && n.ShortTag() != "!!map" {
			return nil, c.fail(n, path, "tag %s is not allowed", n.Tag)
		}
		m := &render.Value{Kind: render.KindMap, Keys: make([]string, 0, len(n.Content)/2), Vals: make([]*render.Value, 0, len(n.Content)/2)}
		var seen map[string]int // only for large mappings; small ones scan m.Keys
		if len(n.Content) > 32 {
			seen = make(map[string]int, len(n.Content)/2)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			if kn.Kind == yaml.AliasNode || kn.Anchor != "" {
				return nil, c.fail(kn, path, "yaml anchors and aliases are not allowed")
			}
			if kn.Kind != yaml.ScalarNode || kn.ShortTag() != "!!str" {
				if kn.ShortTag() == "!!merge" {
					return nil, c.fail(kn, path, "yaml merge keys (<<) are not allowed")
				}
				return nil, c.fail(kn, path, "key %q is not a string (%s)", kn.Value, kn.ShortTag())
			}
			k := kn.Value
			path = append(path, k)
			if seen != nil {
				if first, dup := seen[k]; dup {
					return nil, c.duplicate(kn, path, first)
				}
				seen[k] = kn.Line
			} else {
				for j, prev := range m.Keys {
					if prev == k {
						return nil, c.duplicate(kn, path, n.Content[2*j].Line)
					}
				}
			}
			v, err := c.convert(vn, path, depth+1)
			if err != nil {
				return nil, err
			}
			path = path[:len(path)-1]
			m.Keys = append(m.Keys, k)
			m.Vals = append(m.Vals, v)
		}
		return m, nil
	case yaml.SequenceNode:
		if n.Style&yaml.TaggedStyle != 0 && n.ShortTag() != "!!seq" {
			return nil, c.fail(n, path, "tag %s is not allowed", n.Tag)
		}
		l := &render.Value{Kind: render.KindList, Items: make([]*render.Value, 0, len(n.Content))}
		for i, it := range n.Content {
			path = append(path, indexSegment(i))
			v, err := c.convert(it, path, depth+1)
			if err != nil {
				return nil, err
			}
			path = path[:len(path)-1]
			l.Items = append(l.Items, v)
		}
		return l, nil
	case yaml.ScalarNode:
		return c.scalar(n, path)
	}
	return nil, c.fail(n, path, "unsupported yaml node")
}

func (c *converter) scalar(n *yaml.Node, path []string) (*render.Value, error) {
	plain := n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0
	explicit := n.Style&yaml.TaggedStyle != 0
	tag := n.ShortTag()
	if explicit {
		switch tag {
		case "!!str", "!!int", "!!float", "!!bool", "!!null":
		default:
			return nil, c.fail(n, path, "tag %s is not allowed", n.Tag)
		}
	}
	switch tag {
	case "!!str":
		if plain && !explicit {
			switch strings.ToLower(n.Value) {
			case "y", "yes", "n", "no", "on", "off":
				return nil, c.fail(n, path, "unquoted %q is a boolean in YAML 1.1 and a string in YAML 1.2; write true/false or quote it", n.Value)
			}
			// yaml.v3 reads a float literal that overflows float64 (1e400,
			// -1.5e999) as a string; it is a number that has no JSON
			// equivalent, refused like .inf.
			if numberLike(n.Value) && overflows(n.Value) {
				return nil, c.fail(n, path, "number %q overflows a 64-bit float and has no JSON equivalent; quote it if it is a string", n.Value)
			}
		}
		return render.String(n.Value), nil
	case "!!timestamp":
		return render.String(n.Value), nil
	case "!!null":
		return render.Null(), nil
	case "!!bool":
		switch n.Value {
		case "true":
			return render.Bool(true), nil
		case "false":
			return render.Bool(false), nil
		}
		return nil, c.fail(n, path, "boolean %q must be written true or false", n.Value)
	case "!!int":
		s := strings.TrimPrefix(n.Value, "-")
		if s == "" || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
			return nil, c.fail(n, path, "integer %q is not plain decimal (YAML 1.1 reads 010 as octal); write it in decimal or quote it", n.Value)
		}
		i, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil || i > render.MaxSafeInt || i < -render.MaxSafeInt {
			return nil, c.fail(n, path, "integer %s is beyond ±2^53 and has no exact JSON equivalent", n.Value)
		}
		return render.Int(i), nil
	case "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, c.fail(n, path, "number %q has no JSON equivalent (NaN and infinities are refused)", n.Value)
		}
		// An integer literal beyond int64 (100000000000000000000) is a
		// float to yaml.v3; it is an integer beyond ±2^53 as surely as
		// one that fits int64 is.
		if c.source && !explicit && !strings.ContainsAny(n.Value, ".eE") && math.Abs(f) > render.MaxSafeInt {
			return nil, c.fail(n, path, "integer %s is beyond ±2^53 and has no exact JSON equivalent", n.Value)
		}
		if canon, err := gojcs.NumberToJSON(f); err != nil || canon != n.Value {
			if !strings.ContainsAny(canon, ".eE") && math.Abs(f) > render.MaxSafeInt {
				// Its canonical form is an integer beyond ±2^53, which
				// is refused as well: no unquoted form means this number.
				return nil, c.fail(n, path, "number %q would be read as the integer %s, beyond ±2^53 with no exact JSON equivalent; quote it", n.Value, canon)
			}
			return nil, c.fail(n, path, "number %q would be read as %s; write %s or quote it", n.Value, canon, canon)
		}
		return render.Float(f), nil
	}
	return nil, c.fail(n, path, "tag %s is not allowed", tag)
}

// Line returns the line of the node at path (segments as produced by the
// converter: keys, or "[i]" for list items), or of its nearest existing
// ancestor.
func (d *Doc) Line(path ...string) int {
	n := d.Node
	line := n.Line
	for _, seg := range path {
		next := child(n, seg)
		if next == nil {
			return line
		}
		if next.key != nil {
			line = next.key.Line
		} else {
			line = next.val.Line
		}
		n = next.val
	}
	return line
}

type pos struct{ key, val *yaml.Node }

func child(n *yaml.Node, seg string) *pos {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == seg {
				return &pos{key: n.Content[i], val: n.Content[i+1]}
			}
		}
	case yaml.SequenceNode:
		s := strings.TrimSuffix(strings.TrimPrefix(seg, "["), "]")
		if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < len(n.Content) {
			return &pos{val: n.Content[i]}
		}
	}
	return nil
}

// Errorf returns an *Error at path in d.
func (d *Doc) Errorf(path []string, format string, args ...any) *Error {
	return &Error{File: d.File, Line: d.Line(path...), Field: FieldPath(path), Msg: fmt.Sprintf(format, args...)}
}

var smallIndexes = func() [64]string {
	var a [64]string
	for i := range a {
		a[i] = "[" + strconv.Itoa(i) + "]"
	}
	return a
}()

func indexSegment(i int) string {
	if i < len(smallIndexes) {
		return smallIndexes[i]
	}
	return "[" + strconv.Itoa(i) + "]"
}

// numberLike reports whether s could be a YAML float literal: it starts
// with a digit, a sign or a point. Only those need the parse below, which
// most plain strings would fail at some cost.
func numberLike(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.'
}

// overflows reports whether s is a float literal beyond float64's range.
func overflows(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return errors.Is(err, strconv.ErrRange)
}
