package render

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gojcs "github.com/gowebpki/jcs"
	yaml "gopkg.in/yaml.v3"
)

// TestCanonicalVectors runs the RFC 8785 vectors through this package's
// canonicalizer (the one every configpub digest uses).
func TestCanonicalVectors(t *testing.T) {
	inputs, _ := filepath.Glob("../../fixtures/vectors/rfc8785/*.input.json")
	if len(inputs) == 0 {
		t.Fatal("no vectors found")
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".input.json")
		t.Run(name, func(t *testing.T) {
			src, _ := os.ReadFile(in)
			want, _ := os.ReadFile(strings.TrimSuffix(in, ".input.json") + ".canonical.json")
			var v Value
			if err := v.UnmarshalJSON(src); err != nil {
				t.Fatal(err)
			}
			got, err := Canonical(&v)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

func TestNumberVectors(t *testing.T) {
	b, err := os.ReadFile("../../fixtures/vectors/numbers.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []struct{ Bits, JSON string }
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	for _, x := range vs {
		u, _ := strconv.ParseUint(x.Bits, 16, 64)
		got, err := Canonical(Float(math.Float64frombits(u)))
		if err != nil || string(got) != x.JSON {
			t.Errorf("%s: got %s (%v), want %s", x.Bits, got, err, x.JSON)
		}
	}
}

func TestCanonicalRefuses(t *testing.T) {
	tests := []struct {
		name string
		v    *Value
	}{
		{"nan", Float(math.NaN())},
		{"inf", Float(math.Inf(1))},
		{"beyond 2^53", Int(MaxSafeInt + 1)},
		{"invalid utf-8", String("\xff")},
		{"duplicate key", Map().Add("a", Null()).Add("a", Null())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Canonical(tt.v); err == nil {
				t.Errorf("got nil error, want a refusal")
			}
		})
	}
}

// TestYAMLRoundTrip renders tricky values and reads them back with yaml.v3:
// the JSON form must be unchanged (same JCS bytes).
func TestYAMLRoundTrip(t *testing.T) {
	doc := Map().
		Add("plain", String("hello")).
		Add("yes", String("no")).
		Add("on", Bool(true)).
		Add("01", String("010")).
		Add("float", Float(1.5)).
		Add("intlike", Float(2)).
		Add("big", Int(MaxSafeInt)).
		Add("neg", Int(-7)).
		Add("null", Null()).
		Add("empty map", Map()).
		Add("empty list", List()).
		Add("controls", String("a\x00b\x1fc\x7f\u0085\u2028\u2029\ufeff\t\r\n\"\\")).
		Add("unicode", String("😂 דּ é")).
		Add("list", List(String("x"), Map().Add("k", Int(1)).Add("j", List(Int(1), List(Int(2)))), List(), Map())).
		Add("nested", Map().Add("a", Map().Add("b", String("- not a list"))))
	y, err := YAML(doc)
	if err != nil {
		t.Fatal(err)
	}
	var back any
	if err := yaml.Unmarshal(y, &back); err != nil {
		t.Fatalf("yaml.v3 cannot read the rendering: %v\n%s", err, y)
	}
	jb, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gojcs.Transform(jb)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Canonical(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("round trip changed the value:\n got %s\nwant %s\nyaml:\n%s", got, want, y)
	}
}

// TestYAMLKeyQuoting: a key is written plain when it consists of letters,
// digits, "_", ".", "/" and "-", starts with a letter or "_", and is not a
// YAML 1.1 boolean or null word in any case; otherwise double-quoted — the
// rule docs/wire-contract.md gives writers of values.yml.
func TestYAMLKeyQuoting(t *testing.T) {
	for k, plain := range map[string]bool{
		"logging.level": true, "_x": true, "a/b-c.d_1": true, "x-": true,
		".x": false, "/x": false, "-x": false, "1x": false, "a b": false, "a:b": false, "": false,
		"True": false, "OFF": false, "Yes": false, "n": false, "NULL": false, "nil": true,
	} {
		y, err := YAML(Map().Add(k, Int(1)))
		if err != nil {
			t.Fatal(err)
		}
		if got := !bytes.HasPrefix(y, []byte(`"`)); got != plain {
			t.Errorf("key %q rendered %q: plain %v, want %v", k, y, got, plain)
		}
	}
}

// TestCanonicalKeyOrderSharedHighSurrogate: U+1F600 and U+1F601 share the
// high surrogate D83D; RFC 8785 orders them by the low one (DE00 < DE01).
func TestCanonicalKeyOrderSharedHighSurrogate(t *testing.T) {
	want := "{\"\U0001F5FF\":3,\"\U0001F600\":2,\"\U0001F601\":1}"
	for range 20 { // sorting equal-comparing keys is not deterministic
		got, err := Canonical(Map().Add("\U0001F601", Int(1)).Add("\U0001F600", Int(2)).Add("\U0001F5FF", Int(3)))
		if err != nil || string(got) != want {
			t.Fatalf("got %s (%v), want %s", got, err, want)
		}
	}
}
