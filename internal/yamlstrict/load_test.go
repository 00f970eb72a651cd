package yamlstrict

import (
	"errors"
	"strings"
	"testing"
	"time"

	yaml "gopkg.in/yaml.v3"

	"github.com/configpub/configpub/internal/render"
)

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		field    string
		msg      string
	}{
		{"duplicate key", "a: 1\nb:\n  c: 1\n  c: 2\n", 4, "b.c", "duplicate key (first at line 3)"},
		{"non-string key", "a:\n  1: x\n", 2, "a", "is not a string"},
		{"bool key", "true: x\n", 1, "", "is not a string"},
		{"merge key", "a: {x: 1}\nb:\n  <<: {y: 2}\n", 3, "b", "merge keys"},
		{"anchor", "a: &x 1\n", 1, "a", "anchors are not allowed"},
		{"alias", "a: 1\nb: [*x]\n", 0, "", "invalid yaml"},
		{"nan", "a: .nan\n", 1, "a", "NaN"},
		{"inf", "a: -.inf\n", 1, "a", "no JSON equivalent"},
		{"overflowing float", "a: 1e400\n", 1, "a", "overflows a 64-bit float"},
		{"overflowing negative float", "a:\n  b: [-1.5E999]\n", 2, "a.b[0]", "overflows a 64-bit float"},
		{"overflowing float beyond max", "a: 1.7976931348623157e309\n", 1, "a", "overflows a 64-bit float"},
		{"overflowing float with a plus sign", "a: +1e400\n", 1, "a", "overflows a 64-bit float"},
		{"overflowing float with a leading point", "a: .5e999\n", 1, "a", "overflows a 64-bit float"},
		{"underflowing float", "a: 1e-400\n", 1, "a", "would be read as 0"},
		{"beyond 2^53", "a: 9007199254740993\n", 1, "a", "beyond ±2^53"},
		{"float read as an integer beyond 2^53", "a: 1e16\n", 1, "a", "number \"1e16\" would be read as the integer 10000000000000000, beyond ±2^53 with no exact JSON equivalent; quote it"},
		{"float read as a large float", "a: 1e21\n", 1, "a", "would be read as 1e+21; write 1e+21 or quote it"},
		{"octal", "a: [010]\n", 1, "a[0]", "not plain decimal"},
		{"hex", "a: 0x1F\n", 1, "a", "not plain decimal"},
		{"yaml 1.1 float", "v: 1.10\n", 1, "v", "would be read as 1.1"},
		{"yaml 1.1 bool", "a: {b: yes}\n", 1, "a.b", "boolean in YAML 1.1"},
		{"binary", "a: !!binary aGVsbG8=\n", 1, "a", "tag !!binary is not allowed"},
		{"custom tag", "a: !thing x\n", 1, "a", "is not allowed"},
		{"two documents", "a: 1\n---\nb: 2\n", 2, "", "more than one yaml document"},
		{"empty", "", 1, "", "empty document"},
		{"not utf-8 on line 3", "a: 1\nb: 2\nc: caf\xe9\n", 3, "", "invalid UTF-8 at column 7 (byte 0xe9)"},
		{"not utf-8 after a multi-byte character", "a:\n  b: \u00e9\xff\n", 2, "", "invalid UTF-8 at column 7 (byte 0xff)"},
		{"not utf-8 in a comment", "a: 1\n# r\xc3\n", 2, "", "invalid UTF-8 at column 4 (byte 0xc3)"},
		{"truncated utf-8 at the end", "a: 1\nb: \xe2\x82", 2, "", "invalid UTF-8 at column 4 (byte 0xe2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tt.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error", err)
			}
			if (tt.line != 0 && e.Line != tt.line) || e.Field != tt.field || !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("got %d %q %q, want %d %q containing %q", e.Line, e.Field, e.Msg, tt.line, tt.field, tt.msg)
			}
			if !errors.Is(err, ErrRefused) {
				t.Errorf("errors.Is(err, ErrRefused) = false")
			}
		})
	}
}

func TestParseKeepsSchemaTypes(t *testing.T) {
	d, err := Parse("f.yaml", []byte("a: \"no\"\nb: \"010\"\nc: \"1.10\"\nd: 1.5\ne: 10\nf: ~\ng: false\nh: 2001-12-14\ni: !!str 1.10\nj: \"1e400\"\nk: inf\nl: 1e400x\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"no","b":"010","c":"1.10","d":1.5,"e":10,"f":null,"g":false,"h":"2001-12-14","i":"1.10","j":"1e400","k":"inf","l":"1e400x"}`
	got, _ := render.Canonical(d.Value)
	if string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestAliasBombAndDeepNestingAreFast(t *testing.T) {
	bomb := "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	for i, c := range "bcdefghi" {
		prev := string("abcdefghi"[i])
		bomb += string(c) + ": &" + string(c) + " [" + strings.Repeat("*"+prev+",", 8) + "*" + prev + "]\n"
	}
	deep := "a: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n"
	for name, in := range map[string]string{"alias bomb": bomb, "deep": deep, "deep block": "a:\n" + strings.Repeat("- ", 10000) + "x\n"} {
		start := time.Now()
		_, err := Parse("f.yaml", []byte(in))
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", name, d)
		}
	}
}

func TestLine(t *testing.T) {
	d, err := Parse("f.yaml", []byte("a:\n  b:\n    - x\n    - y: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path []string
		want int
	}{{[]string{"a"}, 1}, {[]string{"a", "b"}, 2}, {[]string{"a", "b", "[1]"}, 4}, {[]string{"a", "b", "1", "y"}, 4}, {[]string{"a", "zz"}, 1}} {
		if got := d.Line(tt.path...); got != tt.want {
			t.Errorf("Line(%v) = %d, want %d", tt.path, got, tt.want)
		}
	}
}

// TestErrorShowsTheFileNameEscaped: a refusal prints its file name and
// field escaped, so a name holding a newline cannot start a line of its own.
func TestErrorShowsTheFileNameEscaped(t *testing.T) {
	_, err := Parse("agents/x\n::error title=PWN::ok.yaml", []byte("a: 1\na: 2\n"))
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), `agents/x\n::error title=PWN::ok.yaml:2: `) {
		t.Errorf("got %q, want the name escaped on one line", err)
	}
	e := &Error{File: "a\x1b.yaml", Line: 1, Field: "k\u2028", Msg: "bad"}
	if got, want := e.Error(), `a\x1b.yaml:1: k\u2028: bad`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestParseReadsUTF16 checks that a file with a UTF-16 byte order mark,
// which yaml.v3 reads as UTF-16, is not refused as invalid UTF-8.
func TestParseReadsUTF16(t *testing.T) {
	in := []byte{0xff, 0xfe}
	for _, r := range "a: 1\n" {
		in = append(in, byte(r), 0)
	}
	d, err := Parse("f.yaml", in)
	if err != nil {
		t.Fatal(err)
	}
	if v := d.Value.Get("a"); v == nil || v.Kind != render.KindInt || v.Int != 1 {
		t.Errorf("got %#v, want a: 1", d.Value)
	}
}

// TestParseSourceRefusesIntegersBeyondInt64: an integer literal beyond
// int64 is a float to yaml.v3, and was accepted where one that fits int64
// was refused as beyond ±2^53.
func TestParseSourceRefusesIntegersBeyondInt64(t *testing.T) {
	tests := []struct {
		name, in string
		line     int
		field    string
	}{
		{"beyond uint64", "a: 100000000000000000000\n", 1, "a"},
		{"negative beyond int64", "a:\n  b: -9223372036854775809\n", 2, "a.b"},
		{"with a plus sign", "a: [+20000000000000000000]\n", 1, "a[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSource("f.yaml", []byte(tt.in))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want *Error", err)
			}
			if e.Line != tt.line || e.Field != tt.field || !strings.Contains(e.Msg, "is beyond ±2^53 and has no exact JSON equivalent") {
				t.Errorf("got %d %q %q, want %d %q beyond ±2^53", e.Line, e.Field, e.Msg, tt.line, tt.field)
			}
		})
	}
	// What stays accepted: a float said explicitly, a float in its
	// canonical form, an integer within ±2^53.
	for _, in := range []string{"a: !!float 100000000000000000000\n", "a: !!float 5\n", "a: 1e+21\n", "a: 9007199254740991\n"} {
		if _, err := ParseSource("f.yaml", []byte(in)); err != nil {
			t.Errorf("%q: got %v, want it accepted", in, err)
		}
	}
}

// TestIntegerBeyondInt64WasNeverThatInteger shows why refusing the literal
// breaks no source that meant it: Parse (which still reads published
// values.yml) and yaml.v3 (what a Go runtime and Viper read values.yml
// with) both read 100000000000000000000 as the float 1e+20, and no int64
// holds it.
func TestIntegerBeyondInt64WasNeverThatInteger(t *testing.T) {
	in := []byte("a: 100000000000000000000\n")
	d, err := Parse("values.yml", in)
	if err != nil {
		t.Fatal(err)
	}
	if v := d.Value.Get("a"); v.Kind != render.KindFloat || v.Float != 1e20 {
		t.Errorf("Parse: got %#v, want the float 1e+20", v)
	}
	var m map[string]any
	if err := yaml.Unmarshal(in, &m); err != nil {
		t.Fatal(err)
	}
	if f, ok := m["a"].(float64); !ok || f != 1e20 {
		t.Errorf("yaml.v3: got %T %v, want float64 1e+20", m["a"], m["a"])
	}
	var n struct{ A int64 }
	if err := yaml.Unmarshal(in, &n); err == nil {
		t.Errorf("yaml.v3 stored it in an int64: %d", n.A)
	}
}
