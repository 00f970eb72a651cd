package client

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/configpub/configpub/internal/jcs"
)

// TestCanonicalMatchesJCS holds the direct canonical writer byte-identical to
// internal/jcs (encoding/json + gowebpki/jcs) on the compiler's golden
// namespaces and on random values with escapes, non-ASCII and
// supplementary-plane keys, and numbers.
func TestCanonicalMatchesJCS(t *testing.T) {
	var values []any
	files, _ := filepath.Glob("../../fixtures/golden/*/*/*/values.yml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, aud := range []string{"agent", "gateway", "knowledge"} {
			if doc, err := parseValues(b, aud); err == nil {
				values = append(values, doc.Namespace, doc.Settings)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		values = append(values, randomValue(rng, 4))
	}
	values = append(values, map[string]any{"\u20ac": int64(1), "\U0001F600": int64(2), "\uFB33": int64(3), "a\x00b": "\x01\x1f\"\\/\u2028<>&",
		"n": []any{int64(-maxSafeInteger), 1e21, 1e-7, math.Copysign(0, -1), 0.1, 123456789.5, math.MaxFloat64}})
	for i, v := range values {
		want, err := jcs.Canonical(v)
		if err != nil {
			t.Fatalf("value %d: jcs: %v", i, err)
		}
		got, err := appendCanonical(nil, v)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("value %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(8)
	if depth == 0 {
		k = rng.IntN(5)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return randomString(rng)
	case 3:
		return rng.Int64N(2*maxSafeInteger) - maxSafeInteger
	case 4:
		return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(40)-20))
	case 5:
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
	alphabet := []rune{'a', 'B', '0', ' ', '"', '\\', '/', '\n', '\t', '\x00', '\x1f', 'é', '€', '\u2028', '\uFB33', '\U0001F600', '\U00010000'}
	r := make([]rune, rng.IntN(6))
	for i := range r {
		r[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(r)
}

// FuzzCanonicalMatchesJCS parses arbitrary YAML strictly and requires the
// direct canonical writer to agree with internal/jcs on whatever parses.
func FuzzCanonicalMatchesJCS(f *testing.F) {
	f.Add([]byte(goodEnvelope + "agentPolicy:\n  a: 1\n  b: [x, \"\\u2028\", 1.5e300]\n  \"\\U0001F600\": {c: null}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := parseValues(b, "agent")
		if err != nil {
			return
		}
		values := []any{doc.Namespace}
		if doc.Settings != nil {
			values = append(values, doc.Settings)
		}
		for _, v := range values {
			want, err := jcs.Canonical(v)
			if err != nil {
				t.Fatalf("jcs: %v", err)
			}
			got, err := appendCanonical(nil, v)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("got %s (%v), want %s", got, err, want)
			}
		}
	})
}
