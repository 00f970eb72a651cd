package render

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// TestMarshalMatchesReference holds the one encoder (Marshal, and so
// AppendCanonical) byte-identical to gowebpki/jcs on the compiler's golden
// values.yml documents (decoded by yaml.v3), on random values with escapes,
// non-ASCII and supplementary-plane keys and numbers, and on the edge cases
// below.
func TestMarshalMatchesReference(t *testing.T) {
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
			"n": []any{int64(-MaxSafeInt), MaxSafeInt, uint64(MaxSafeInt), 1e21, 1e-7, math.Copysign(0, -1), 0.1, 123456789.5, math.MaxFloat64, math.SmallestNonzeroFloat64}},
		[]any{json.Number("1.0E2"), json.Number("-0"), json.Number("0.1"), json.Number("-1e-7")},
		map[string]any{}, []any{}, "", nil, true, false,
	)
	for i, v := range values {
		want, err := reference(t, v)
		if err != nil {
			t.Fatalf("value %d: reference: %v", i, err)
		}
		got, err := Marshal(v)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("value %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func TestMarshalRefusesRatherThanRounds(t *testing.T) {
	for _, v := range []any{
		int64(MaxSafeInt + 1),
		map[string]any{"a": []any{-MaxSafeInt - 1}},
		json.Number("12345678901234567890"),
		json.RawMessage(`{"a":`),
		json.RawMessage(`1 2`),
		math.NaN(),
	} {
		if got, err := Marshal(v); err == nil {
			t.Errorf("Marshal(%#v) = %s, want a refusal", v, got)
		}
	}
	got, err := Marshal(struct {
		B int     `json:"b"`
		A string  `json:"a"`
		F float64 `json:"f"`
	}{2, "<x>", 1.3e16})
	if want := `{"a":"<x>","b":2,"f":13000000000000000}`; err != nil || string(got) != want {
		t.Errorf("got %s (%v), want %s", got, err, want)
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
		return rng.Int64N(2*MaxSafeInt+1) - MaxSafeInt
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

// exact reports whether v holds only what Marshal represents without
// loss: valid UTF-8 strings and integers within ±2^53 (the documented
// refusals where the reference silently alters the data).
func exact(v any) bool {
	switch x := v.(type) {
	case string:
		return utf8.ValidString(x)
	case int:
		return x >= -MaxSafeInt && x <= MaxSafeInt
	case int64:
		return x >= -MaxSafeInt && x <= MaxSafeInt
	case uint64:
		return x <= MaxSafeInt
	case json.Number:
		// An integer literal beyond ±2^53 is exact only when it is exactly
		// a float64 (the reference rounds the others).
		if strings.ContainsAny(string(x), ".eE") {
			return true
		}
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil && i >= -MaxSafeInt && i <= MaxSafeInt {
			return true
		}
		f, err := strconv.ParseFloat(string(x), 64)
		return err == nil && strconv.FormatFloat(f, 'f', -1, 64) == string(x)
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

// FuzzMarshalMatchesReference decodes arbitrary input as YAML (yaml.v3) and
// as JSON (encoding/json, with and without UseNumber) and requires Marshal to
// agree with gowebpki/jcs: the same bytes when both accept, and a refusal
// only where the reference errors too or the value is not exactly
// representable.
func FuzzMarshalMatchesReference(f *testing.F) {
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
			got, err := Marshal(v)
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
