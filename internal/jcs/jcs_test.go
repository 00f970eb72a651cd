package jcs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"struct fields sorted", struct {
			B int    `json:"b"`
			A string `json:"a"`
		}{2, "<x>"}, `{"a":"<x>","b":2}`},
		{"map keys by UTF-16 units", map[string]int{"\ufb33": 1, "\U0001F600": 2, "\u20ac": 3},
			// U+1F600 is the surrogate pair D83D DE00: it sorts after U+20AC
			// and before U+FB33, unlike in code-point order.
			"{\"\u20ac\":3,\"\U0001F600\":2,\"\ufb33\":1}"},
		{"raw message numbers", json.RawMessage(`{"n":1.0E2,"m":-0.0}`), `{"m":0,"n":100}`},
		{"bytes", []byte(`[ true , null ]`), `[true,null]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCanonicalRejectsInvalidJSON(t *testing.T) {
	if _, err := Canonical([]byte(`{"a":`)); err == nil {
		t.Fatal("want an error for truncated JSON")
	}
}

func TestDigest(t *testing.T) {
	got, err := Digest(map[string]any{"b": 1, "a": []int{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"a":[1,2],"b":1}`))
	if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if BytesDigest(nil) != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("BytesDigest(nil) = %s", BytesDigest(nil))
	}
}
