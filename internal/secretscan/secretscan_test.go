package secretscan

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/render"
)

func TestNormalizeAndNames(t *testing.T) {
	for _, n := range []string{"dbPassword", "db_password", "DB-PASSWORD", "db password", "X-API-Key", "client.secret", "PRIVATE_KEY", "Authorization"} {
		if !IsCredentialName(n) {
			t.Errorf("%q: not a credential name", n)
		}
	}
	for _, n := range []string{"passwordPolicy", "maxOutputTokens", "tokensPerDay", "secretRef", "description", "keyId", "tokenizer"} {
		if IsCredentialName(n) {
			t.Errorf("%q: a credential name", n)
		}
	}
}

func TestIsReference(t *testing.T) {
	for s, want := range map[string]bool{
		"vault://secret/db#password":         true,
		"vault://secret/db":                  true,
		"vault://":                           false,
		"vault://secret/db#pw extra":         false,
		"vault://secret/db?token=x":          false,
		"vault://../etc":                     false,
		"vault:///abs":                       false,
		"vault://a#b#c":                      false,
		"https://keys.example.com/jwks.json": false, // only where allowed
		"VAULT://secret/db":                  false,
		"vault://secret/" + strings.Repeat("a", MaxRefLen): false,
	} {
		if got := IsReference(s, false); got != want {
			t.Errorf("IsReference(%q) = %v, want %v", s, got, want)
		}
	}
	for s, want := range map[string]bool{
		"https://keys.example.com/jwks.json":  true,
		"https://keys.example.com:8443/a/b":   true,
		"https://u:p@keys.example.com/jwks":   false,
		"https://keys.example.com/jwks?sig=x": false,
		"http://keys.example.com/jwks":        false,
	} {
		if got := IsReference(s, true); got != want {
			t.Errorf("IsReference(%q, https) = %v, want %v", s, got, want)
		}
	}
}

// FuzzValue: the detector never panics, names a rule whenever it finds
// something, and surrounding a string with spaces never hides a finding.
// Scan over a document holding the string as key and value never panics
// and finds at least what Value finds.
func FuzzValue(f *testing.F) {
	for _, s := range []string{
		"", "hunter2", "vault://secret/db#pw", "-----BEGIN RSA PRIVATE KEY-----", "Bearer abc123def456ghi789",
		"Basic dXNlcjpwYXNzd29yZA==", "postgres://a:b@c/d", "https://x/?sig=abc", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln",
		"LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t", "Authorization: Token x1y2z3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rule := Value(s)
		if rule != "" && Value(" "+s+" ") == "" {
			t.Errorf("padding hides a %s", rule)
		}
		doc := render.Map().Add(s, render.String(s)).Add("password", render.String(s)).Add("signingKeyRef", render.String(s))
		f := Scan(doc)
		if rule != "" && f == nil {
			t.Errorf("Scan misses a %s that Value finds", rule)
		}
		if f != nil && (f.Rule == "" || len(f.Path) == 0) {
			t.Errorf("finding without rule or path: %+v", f)
		}
		if f != nil && strings.Contains(f.Rule, s) && len(s) > 8 {
			t.Errorf("rule %q echoes the input", f.Rule)
		}
	})
}

// BenchmarkValue: the detector over typical setting values and a 4 KiB
// prompt (compile runs it on every string and member name).
func BenchmarkValue(b *testing.B) {
	prompt := strings.Repeat("You are a helpful support agent. Answer politely, cite sources = docs@example.com. ", 50)[:4096]
	inputs := []string{"DEBUG", "jdbc:postgresql://postgres.dev.lightapi.net:5432/agent", "vault://secret/dev/agent/db#password",
		"https://oauth.lightapi.net/.well-known/jwks.json", "maxOutputTokens", "tenant-2024-region-eu", prompt}
	n := 0
	for _, s := range inputs {
		n += len(s)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, s := range inputs {
			if Value(s) != "" {
				b.Fatalf("%q flagged", s[:min(len(s), 20)])
			}
		}
	}
}

// TestScanPath: a finding names the full member path, list items as
// "[i]", whether it is deep in the document or after siblings that were
// walked and left, and whether the credential is a key or a value.
func TestScanPath(t *testing.T) {
	s := render.String
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlc2lnbmF0dXJlc2ln"
	clean := func() *render.Value {
		return render.Map().Add("a", render.Map().Add("b", render.List(s("x"), s("y")))).Add("c", s("plain text"))
	}
	for _, tc := range []struct {
		doc   *render.Value
		path  string
		inKey bool
	}{
		{clean().Add("d", render.Map().Add("e", render.List(s("ok"), render.Map().Add("f", s(jwt))))), "d/e/[1]/f", false},
		{clean().Add("db", render.Map().Add("password", s("hunter2hunter2"))), "db/password", false},
		{clean().Add("g", render.Map().Add(jwt, s("x"))), "g/" + jwt, true},
		{render.List(s("ok"), s(jwt)), "[1]", false},
	} {
		f := Scan(tc.doc)
		if f == nil {
			t.Fatalf("no finding, want one at %s", tc.path)
		}
		if got := strings.Join(f.Path, "/"); got != tc.path || f.InKey != tc.inKey {
			t.Errorf("finding at %s (in key %v), want %s (in key %v)", got, f.InKey, tc.path, tc.inKey)
		}
	}
	if f := Scan(clean()); f != nil {
		t.Fatalf("clean document: finding %v", f)
	}
}

// TestAnchorIndex: the one-pass index reports exactly the anchors
// strings.Contains finds, on strings built from anchor pieces, overlaps and
// noise.
func TestAnchorIndex(t *testing.T) {
	var all []anchor
	for _, list := range ruleAnchors {
		all = append(all, list...)
	}
	want := func(lower string) uint64 {
		var m uint64
		for _, a := range all {
			if strings.Contains(lower, a.text) {
				m |= a.bit
			}
		}
		return m
	}
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "s", "k", "-", "_", ".", "=", ":", "/", " ", "x", "o", "e", "y", "j", "p"}
	for _, a := range all {
		pieces = append(pieces, a.text, a.text[:len(a.text)-1], a.text[1:])
	}
	found := 0
	for i := range 50000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		got, exp := ruleAnchors.find(s), want(s)
		if got != exp {
			t.Fatalf("case %d %q: index %b, strings.Contains %b", i, s, got, exp)
		}
		if got != 0 {
			found++
		}
	}
	if found < 10000 {
		t.Fatalf("only %d of 50,000 cases held an anchor: the test does not exercise the index", found)
	}
}
