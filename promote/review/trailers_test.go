package review_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/configpub/configpub/promote/review"
)

func TestParseTrailers(t *testing.T) {
	tests := []struct {
		name    string
		message string
		want    []review.Trailer
	}{
		{name: "subject only", message: "Reviewed-by: A\n", want: nil},
		{name: "subject and trailers", message: "fix\n\nReviewed-by: Alice <a@x>\nApproved-by: Bob\n", want: []review.Trailer{{"Reviewed-by", "Alice <a@x>"}, {"Approved-by", "Bob"}}},
		{name: "body then trailers", message: "fix\n\nsome body: text here\nmore\n\nReviewed-by: A\n\n\n", want: []review.Trailer{{"Reviewed-by", "A"}}},
		{name: "trailers not in last paragraph", message: "fix\n\nReviewed-by: A\n\ntrailing prose\n", want: nil},
		{name: "mixed block without sign-off", message: "fix\n\nReviewed-by: A\nthis is prose\n", want: nil},
		{name: "mixed block with sign-off", message: "fix\n\nSigned-off-by: D\nReviewed-by: A\nprose line\n", want: []review.Trailer{{"Signed-off-by", "D"}, {"Reviewed-by", "A"}}},
		{name: "continuation line", message: "fix\n\nReviewed-by: Alice\n  Liddell\n", want: []review.Trailer{{"Reviewed-by", "Alice Liddell"}}},
		{name: "token with space is not a trailer", message: "fix\n\nReviewed by: A\n", want: nil},
		{name: "crlf", message: "fix\r\n\r\nReviewed-by: A\r\n", want: []review.Trailer{{"Reviewed-by", "A"}}},
		{name: "empty value kept", message: "fix\n\nReviewed-by:\n", want: []review.Trailer{{"Reviewed-by", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := review.ParseTrailers(tt.message)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if got := review.TrailerValues(review.ParseTrailers("x\n\nReviewed-by:\nREVIEWED-BY: B\n"), "reviewed-by"); !reflect.DeepEqual(got, []string{"B"}) {
		t.Errorf("got values %q, want [B] (case-insensitive, empty skipped)", got)
	}
}

// FuzzParseTrailers: any message parses without panicking; every trailer
// found has a token key and a trimmed value, and appending the found
// trailers as a fresh final paragraph finds them again.
func FuzzParseTrailers(f *testing.F) {
	for _, seed := range []string{"fix\n\nReviewed-by: A\n", "x\n\nSigned-off-by: D\nprose\n", "a\n\nK: v\n  cont\n", "", "\n\n:\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		got := review.ParseTrailers(msg)
		var again strings.Builder
		again.WriteString("subject\n\n")
		for _, tr := range got {
			if tr.Key == "" || strings.ContainsAny(tr.Key, " \t:") {
				t.Fatalf("got key %q, want a token", tr.Key)
			}
			if strings.TrimSpace(tr.Value) != tr.Value || strings.Contains(tr.Value, "\n") {
				t.Fatalf("got value %q, want trimmed, one line", tr.Value)
			}
			again.WriteString(tr.Key + ": " + tr.Value + "\n")
		}
		if len(got) == 0 {
			return
		}
		if re := review.ParseTrailers(again.String()); !reflect.DeepEqual(re, got) {
			t.Fatalf("got %q re-parsing %q, want %q", re, again.String(), got)
		}
	})
}
