package schemas

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	cands := []string{"maxOutputTokens", "maxToolCallsPerTurn", "temperature", "alias"}
	tests := []struct{ name, in, want string }{
		{"one typo", "maxOuputTokens", "maxOutputTokens"},
		{"case only", "Temperature", "temperature"},
		{"transposition", "alais", "alias"},
		{"too far", "topP", ""},
		{"exact is not a suggestion", "alias", ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.in, cands); got != tt.want {
			t.Errorf("%s: Closest(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestUnknownFieldSuggestion(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"apiVersion": "configpub.dev/v1", "kind": "Host",
		"metadata": map[string]any{"name": "a.example.com", "labls": map[string]any{}},
		"spec":     map[string]any{"tenant": "t", "owner": "o", "ownr": "x"}}
	err = s.Validate("source/host", doc)
	if err == nil {
		t.Fatal("validated a document with two unknown fields")
	}
	for _, want := range []string{`/metadata/labls: unknown field (did you mean "labels"?)`, `/spec/ownr: unknown field (did you mean "owner"?)`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	}
}
