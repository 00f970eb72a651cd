package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestFromBytes(t *testing.T) {
	// SHA-256 of "abc" (FIPS 180-2, appendix B.1).
	const want = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := FromBytes([]byte("abc")); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	sum := sha256.Sum256([]byte("abc"))
	if got := FromSum(sum); got != want || got.Hex() != hex.EncodeToString(sum[:]) {
		t.Fatalf("FromSum: got %s (hex %s), want %s", got, got.Hex(), want)
	}
}

func TestValid(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		name string
		s    string
		want bool
	}{
		{"valid", "sha256:" + hex64, true},
		{"uppercase hex", "sha256:" + strings.ToUpper(hex64), false},
		{"short", "sha256:" + hex64[:63], false},
		{"long", "sha256:" + hex64 + "0", false},
		{"other algorithm", "sha512:" + hex64, false},
		{"no prefix", hex64, false},
		{"non-hex", "sha256:" + hex64[:63] + "g", false},
		{"empty", "", false},
	}
	re := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid(tt.s); got != tt.want || got != re.MatchString(tt.s) {
				t.Fatalf("Valid(%q) = %v, want %v (and the same as the pattern)", tt.s, got, tt.want)
			}
			d, err := Parse(tt.s)
			if tt.want != (err == nil) || (err != nil && !errors.Is(err, ErrInvalid)) || (err == nil && d.String() != tt.s) {
				t.Fatalf("Parse(%q) = %q, %v", tt.s, d, err)
			}
		})
	}
}

func FuzzValidMatchesPattern(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("a", 64))
	f.Add("sha256:")
	re := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	f.Fuzz(func(t *testing.T, s string) {
		if Valid(s) != re.MatchString(s) {
			t.Fatalf("Valid(%q) = %v, pattern says %v", s, Valid(s), re.MatchString(s))
		}
	})
}
