package configserver

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
)

// FuzzHeldSequence: the handler reads X-Config-Held-Sequence only when it
// is one field line of decimal digits (the manifest's sequence, as the
// wire contract sends it) — no sign, no space, no second line — and then
// answers by comparing it with the current manifest's sequence: 503 when
// the runtime holds a higher one, "a newer manifest waits" when lower.
// Anything else is read as no header at all.
func FuzzHeldSequence(f *testing.F) {
	for _, s := range []struct {
		v   string
		seq int64
	}{
		{"7", 7}, {"6", 7}, {"8", 7}, {"+8", 7}, {"-1", 7}, {" 8", 7}, {"0x8", 7},
		{"99999999999999999999", 7}, {"", 7}, {"007", 7}, {"8", 0},
	} {
		f.Add(s.v, "", s.seq)
	}
	f.Add("8", "9", int64(7))
	f.Fuzz(func(t *testing.T, v, second string, seq int64) {
		if seq < 0 {
			seq = -seq
		}
		r := &http.Request{Header: http.Header{bundle.HeaderHeldSequence: {v}}}
		if second != "" {
			r.Header[bundle.HeaderHeldSequence] = append(r.Header[bundle.HeaderHeldSequence], second)
		}
		d := &Delivery{Manifest: fmt.Appendf(nil, `{"sequence":%d}`, seq)}
		below, behind := heldVersus(r, d)
		held, err := strconv.ParseUint(v, 10, 63)
		readable := second == "" && seq > 0 && v != "" && strings.Trim(v, "0123456789") == "" && err == nil
		switch {
		case !readable:
			if below || behind != nil {
				t.Fatalf("X-Config-Held-Sequence %q (and %q) against %d: below %v, behind %v; want it read as absent", v, second, seq, below, behind)
			}
		case below != (int64(held) < seq) || (behind != nil) != (int64(held) > seq):
			t.Fatalf("X-Config-Held-Sequence %q against %d: below %v, behind %v", v, seq, below, behind)
		case behind != nil && (behind.status != http.StatusServiceUnavailable || !strings.Contains(behind.err.Error(), strconv.FormatUint(held, 10))):
			t.Fatalf("X-Config-Held-Sequence %q against %d: %d %v, want a 503 naming the held sequence", v, seq, behind.status, behind.err)
		}
	})
}
