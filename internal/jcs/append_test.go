package jcs

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"

	gojcs "github.com/gowebpki/jcs"
	yaml "gopkg.in/yaml.v3"
)

// reference is RFC 8785 as github.com/gowebpki/jcs computes it, over the
// encoding/json form of v (what Canonical does).
func reference(t testing.TB, v any) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return gojcs.Transform(buf.Bytes())
}

// TestAppendValueMatchesReference holds AppendValue byte-identical to
// gowebpki/jcs on the compiler's golden values.yml documents (decoded by
// yaml.v3), on random values with escapes, non-ASCII and supplementary-plane
// keys and numbers, and on the edge cases below.
func TestAppendValueMatchesReference(t *testing.T) {
	var values []any
	files, _ := filepath.Glob("../../fixtures/golden/*/*/*/values.yml")
	if len(files) == 0 {
		t.Fatal("no golden values.yml found")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		values = append(values, doc)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		values = append(values, randomValue(rng, 4))
	}
	values = append(values,
		map[string]any{"\u20ac": int64(1), "\U0001F600": int64(2), "\uFB33": int64(3), "\U0001F601": 4, "\U0001F5FF": 5, "a\x00b": "\x01\x1f\"\\/\u2028<>&",
			"n": []any{int64(-MaxSafeInteger), MaxSafeInteger, uint64(MaxSafeInteger), 1e21, 1e-7, math.Copysign(0, -1), 0.1, 123456789.5, math.MaxFloat64, math.SmallestNonzeroFloat64}},
		[]any{json.Number("1.0E2"), json.Number("-0"), json.Number("0.1"), json.Number("12345678901234567890"), json.Number("-1e-7")},
		map[string]any{}, []any{}, "", nil, true, false,
	)
	for i, v := range values {
		want, err := reference(t, v)
		if err != nil {
			t.Fatalf("value %d: reference: %v", i, err)
		}
		got, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("value %d:\n got %s\nwant %s", i, got, want)
		}
		if c, err := Canonical(v); err != nil || !bytes.Equal(c, want) {
			t.Fatalf("value %d: Canonical got %s (%v), want %s", i, c, err, want)
		}
	}
}

func TestAppendValueAppends(t *testing.T) {
	got, err := AppendValue([]byte("x="), map[string]any{"b": []any{1, "é"}, "a": nil})
	if want := `x={"a":null,"b":[1,"é"]}`; err != nil || string(got) != want {
		t.Fatalf("got %s (%v), want %s", got, err, want)
	}
}

func TestAppendValueRefuses(t *testing.T) {
	tests := []struct {
		name string
		v    any
	}{
		{"nan", math.NaN()},
		{"inf", []any{math.Inf(-1)}},
		{"int beyond 2^53", int64(MaxSafeInteger + 1)},
		{"negative int beyond 2^53", map[string]any{"a": -MaxSafeInteger - 1}},
		{"uint64 beyond 2^53", uint64(math.MaxUint64)},
		{"invalid utf-8 string", "\xff"},
		{"invalid utf-8 key", map[string]any{"\xfe": 1}},
		{"invalid number literal", json.Number("0x10")},
		{"number out of range", json.Number("1e400")},
		{"non-string keys", map[any]any{1: "x"}},
		{"typed slice", []string{"a"}},
		{"float32", float32(0.1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := AppendValue(nil, tt.v); err == nil {
				t.Errorf("got %s, want a refusal", got)
			}
		})
	}
}

func TestCompareKeys(t *testing.T) {
	// RFC 8785 section 3.2.3 order: by UTF-16 code units, so U+1F600 (D83D DE00)
	// sorts after U+20AC and before U+FB33; U+1F5FF (D83D DDFF) before
	// U+1F600 before U+1F601 (same high surrogate, compared by the low one).
	want := []string{"", "a", "ab", "b", "\u00e9", "\u20ac", "\U0001F5FF", "\U0001F600", "\U0001F600a", "\U0001F601", "\ufb33"}
	got := slices.Clone(want)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		rng.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		slices.SortFunc(got, CompareKeys)
		if !slices.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(9)
	if depth == 0 {
		k = rng.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return randomString(rng)
	case 3:
		return rng.Int64N(2*MaxSafeInteger+1) - MaxSafeInteger
	case 4:
		return rng.IntN(1000) - 500 // yaml.v3 decodes small integers as int
	case 5:
		return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(40)-20))
	case 6:
		s := make([]any, rng.IntN(4))
		for i := range s {
			s[i] = randomValue(rng, depth-1)
		}
		return s
	default:
		m := map[string]any{}
		for i := rng.IntN(5); i > 0; i-- {
			m[randomString(rng)] = randomValue(rng, depth-1)
		}
		return m
	}
}

func randomString(rng *rand.Rand) string {
	alphabet := []rune{'a', 'B', '0', ' ', '"', '\\', '/', '\n', '\t', '\x00', '\x1f', 'é', '€', '\u2028', '\uFB33', '\U0001F600', '\U0001F601', '\U0001F5FF', '\U00010000'}
	r := make([]rune, rng.IntN(6))
	for i := range r {
		r[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(r)
}

// exact reports whether v holds only what AppendValue represents without
// loss: valid UTF-8 strings and integers within ±2^53 (the documented
// refusals where the reference silently alters the data).
func exact(v any) bool {
	switch x := v.(type) {
	case string:
		return utf8.ValidString(x)
	case int:
		return x >= -MaxSafeInteger && x <= MaxSafeInteger
	case int64:
		return x >= -MaxSafeInteger && x <= MaxSafeInteger
	case uint64:
		return x <= MaxSafeInteger
	case []any:
		for _, e := range x {
			if !exact(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range x {
			if !exact(k) || !exact(e) {
				return false
			}
		}
	}
	return true
}

// FuzzAppendValueMatchesReference decodes arbitrary input as YAML (yaml.v3)
// and as JSON (encoding/json, with and without UseNumber) and requires
// AppendValue to agree with gowebpki/jcs: the same bytes when both accept,
// and a refusal only where the reference errors too or the value is not
// exactly representable.
func FuzzAppendValueMatchesReference(f *testing.F) {
	f.Add([]byte("a: 1\nb: [x, \"\\u2028\", 1.5e300, -0.0, 9007199254740993]\n\"\\U0001F600\": {c: null}\n\"\\U0001F601\": 2\n"))
	f.Add([]byte(`{"b":1,"a":[true,null,"\u20ac"],"\ud83d\ude02":1.5e3,"n":[1e21,0.000001,-0,1E-7]}`))
	f.Add([]byte("k: !!binary /w==\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var docs []any
		var node yaml.Node
		var y any
		// Aliases are skipped: a few bytes of them expand into values too
		// large to encode (that is yamlstrict's concern, not this one's).
		if yaml.Unmarshal(b, &node) == nil && !hasAlias(&node) && node.Decode(&y) == nil {
			docs = append(docs, y)
		}
		var j any
		if json.Unmarshal(b, &j) == nil {
			docs = append(docs, j)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var n any
		if dec.Decode(&n) == nil {
			docs = append(docs, n)
		}
		for _, v := range docs {
			want, refErr := reference(t, v)
			got, err := AppendValue(nil, v)
			switch {
			case err == nil && refErr == nil:
				if !bytes.Equal(got, want) {
					t.Fatalf("got %s, want %s", got, want)
				}
			case err == nil:
				t.Fatalf("got %s, but the reference refuses: %v", got, refErr)
			case refErr == nil && exact(v):
				t.Fatalf("refused %#v (%v), the reference gives %s", v, err, want)
			}
		}
	})
}

func hasAlias(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode {
		return true
	}
	for _, c := range n.Content {
		if hasAlias(c) {
			return true
		}
	}
	return false
}
