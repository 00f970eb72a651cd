package configserver

import (
	"regexp"
	"strings"
	"testing"
)

// entityTagList is RFC 9110's #entity-tag (5.6.1, 8.8.3): entity-tags,
// each an optional case-sensitive W/ and a quoted opaque-tag of etagc
// (%x21 / %x23-7E / obs-text), separated by commas with optional
// whitespace, empty elements allowed.
// The regexps read text as UTF-8, so obs-text (any byte from 0x80) is
// first replaced by "!", an etagc the current ETag does not hold (asciiTags).
var entityTagList = regexp.MustCompile(`^[ \t,]*((W/)?"[\x21\x23-\x7e]*"[ \t]*(,[ \t,]*|$))*$`)

// asciiTags replaces each byte of v from 0x80 (obs-text) with "!".
func asciiTags(v string) string {
	b := []byte(v)
	for i, c := range b {
		if c >= 0x80 {
			b[i] = '!'
		}
	}
	return string(b)
}

// listedTags returns the opaque-tags (quotes kept, W/ dropped) of a
// value entityTagList matches.
func listedTags(v string) []string {
	return regexp.MustCompile(`"[\x21\x23-\x7e]*"`).FindAllString(v, -1)
}

// FuzzIfNoneMatch: the handler answers 304 for If-None-Match field lines
// only as RFC 9110 (13.1.2) says: their combined value is "*", or a list of
// entity-tags one of which, compared weakly, is the current ETag. A value
// that is neither — a "*" among tags, W/*, an unquoted or unterminated tag,
// a tag split at a comma inside its quotes — matches nothing (the request
// is answered as an unconditional one), whatever it contains.
func FuzzIfNoneMatch(f *testing.F) {
	const etag = `"sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"`
	for _, s := range [][2]string{
		{etag, ""}, {"W/" + etag, ""}, {"*", ""}, {" * ", ""}, {`"x", ` + etag, ""},
		{`"x"`, etag}, {`"a", *`, ""}, {"W/*", ""}, {`"x, ` + etag, ""}, {`sha256:abc`, ""},
		{"*", `"x"`}, {",, " + etag + " ,", ""}, {`w/` + etag, ""}, {etag + etag, ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, first, second string) {
		fields := []string{first}
		if second != "" {
			fields = append(fields, second)
		}
		combined := asciiTags(strings.Join(fields, ", ")) // RFC 9110 5.3: lines combine with commas
		trimmed := strings.Trim(combined, " \t")
		want := trimmed == "*"
		if !want && entityTagList.MatchString(combined) {
			for _, tag := range listedTags(combined) {
				want = want || tag == etag
			}
		}
		if got := ifNoneMatch(fields, etag); got != want {
			t.Fatalf("ifNoneMatch(%q, %s) = %v, want %v", fields, etag, got, want)
		}
	})
}
