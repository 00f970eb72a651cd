package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// hostileValues are namespace values the compiler refuses in its sources; the
// runtime client must refuse them in an artifact too.
var hostileValues = []struct{ name, value string }{
	{"anchor", "&x 1"},
	{"alias bomb", "{a: &a [lol, lol, lol], b: &b [*a, *a, *a], c: [*b, *b, *b]}"},
	{"merge key", "{<<: {k: 1}}"},
	{"deep nesting", strings.Repeat("[", 70) + strings.Repeat("]", 70)},
	{"binary", "!!binary aGVsbG8="},
	{"custom tag", "!thing x"},
	{"set", "!!set {a: null}"},
	{"NaN", ".nan"},
	{"infinity", "-.inf"},
	{"overflowing float", "1e400"},
	{"float not in its JSON form", "1.10"},
	{"integer beyond 2^53", "9007199254740993"},
	{"octal", "010"},
	{"hex", "0x1F"},
	{"YAML 1.1 boolean", "yes"},
	{"YAML 1.1 boolean in a list", "[on, off]"},
	{"duplicate key", "{k: 1, k: 2}"},
	{"non-string key", "{1: x}"},
	{"boolean key", "{true: x}"},
}

// TestClientAndCompilerRefuseTheSameInputs holds the client to the reader the
// compiler uses: every hostile value is refused by internal/yamlstrict as a
// source document and by the client inside a values.yml, both at the same
// field.
func TestClientAndCompilerRefuseTheSameInputs(t *testing.T) {
	for _, tc := range hostileValues {
		t.Run(tc.name, func(t *testing.T) {
			_, serr := yamlstrict.Parse("source.yaml", []byte("a: "+tc.value+"\n"))
			var se *yamlstrict.Error
			if !errors.As(serr, &se) {
				t.Fatalf("compiler reader: got %v, want a refusal", serr)
			}
			_, cerr := parseValues([]byte(goodEnvelope+"agentPolicy:\n  a: "+tc.value+"\n"), "agent")
			var ve *VerificationError
			if !errors.As(cerr, &ve) {
				t.Fatalf("client: got %v, want a *VerificationError", cerr)
			}
			// A path cut short ("…") is one level deeper in values.yml.
			if want := "agentPolicy." + se.Field; se.Field != "" && !strings.HasSuffix(se.Field, "…") && !strings.HasSuffix(ve.Field, want) {
				t.Errorf("client refused at %q, compiler reader at %q: want the same field", ve.Field, se.Field)
			}
		})
	}
}

// TestClientDigestIsTheCompilerDigest checks that a namespace the client
// accepts has the digest the compiler's encoder gives the same document.
func TestClientDigestIsTheCompilerDigest(t *testing.T) {
	ns := "{s: \"x\\u00e9\\U0001F600\", t: 2026-01-01T00:00:00Z, i: -9007199254740992, f: 1e+21, g: 0.5, n: null, b: false, l: [{z: 1, a: 2}], \"\\uFB33\": 1, \"\\U0001F601\": 2}"
	doc, err := parseValues([]byte(goodEnvelope+"agentPolicy: "+ns+"\n"), "agent")
	if err != nil {
		t.Fatal(err)
	}
	src, err := yamlstrict.Parse("source.yaml", []byte(ns))
	if err != nil {
		t.Fatal(err)
	}
	got, err1 := render.Digest(doc.namespace)
	want, err2 := render.Digest(src.Value)
	if err1 != nil || err2 != nil || got != want {
		t.Fatalf("client digest %s (%v), compiler digest %s (%v)", got, err1, want, err2)
	}
	if doc.Namespace["i"] != int64(-9007199254740992) || doc.Namespace["g"] != 0.5 || doc.Namespace["t"] != "2026-01-01T00:00:00Z" {
		t.Errorf("namespace values: got %#v", doc.Namespace)
	}
}
