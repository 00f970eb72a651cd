package schemas

import (
	"regexp"
	"testing"
)

// TestFastPatternsMatchRegexp checks every hand-written matcher against the
// regular expression it replaces.
func TestFastPatternsMatchRegexp(t *testing.T) {
	inputs := []string{"", "a", "0", "-", "a-", "-a", "a.b", "a..b", "ab-cd", "A", "sha256:", "sha256:" + hex64('a'), "sha256:" + hex64('A'), "sha256:" + hex64('g'),
		"5b2f7c1e-9a34-4d6b-8f20-1c7e3a9d4b55", "5b2f7c1e-9a34-4d6b-8f20-1c7e3a9d4b5", "5B2F7C1E-9A34-4D6B-8F20-1C7E3A9D4B55", "5b2f7c1e09a34-4d6b-8f20-1c7e3a9d4b55",
		"2026-08-13T14:00:00Z", "2026-08-13T14:00:00", "2026-08-13 14:00:00Z", "1.0.0", "1.10.0", "01.0.0", "1.0", "1.0.0.0", "1..0", "10.20.30",
		"15m", "1h30m", "5m0s", "100ms", "1us", "3ns", "h", "5", "5x", "1.5h", "5mm", "1hm"}
	for p, fast := range fastPatterns {
		re := regexp.MustCompile(p)
		for _, in := range inputs {
			if got, want := fast(in), re.MatchString(in); got != want {
				t.Errorf("pattern %s, input %q: got %v, want %v", p, in, got, want)
			}
		}
	}
}

func hex64(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}
