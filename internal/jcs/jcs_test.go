package jcs

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBytesDigest(t *testing.T) {
	if got, want := BytesDigest(nil), "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("BytesDigest(nil) = %s, want %s", got, want)
	}
}

func TestAppendString(t *testing.T) {
	got, err := AppendString([]byte("x="), "a\x00\b\f\n\r\t\x1f\"\\/\u2028<>&é\U0001F600")
	if want := `x="a\u0000\b\f\n\r\t\u001f\"\\/` + "\u2028<>&é\U0001F600\""; err != nil || string(got) != want {
		t.Fatalf("got %s (%v), want %s", got, err, want)
	}
	if _, err := AppendString(nil, "\xff"); err == nil {
		t.Fatal("invalid UTF-8 accepted")
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
