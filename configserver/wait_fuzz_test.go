package configserver

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/auth"
)

// wholeSeconds is the whole-seconds form of wait= the wire contract names.
var wholeSeconds = regexp.MustCompile(`^[+-]?[0-9]+$`)

// contractWait is wait= as the wire contract states it, read from the
// decoded value: a Go duration or whole seconds, a negative or unreadable
// one refused, one above max lowered to max.
func contractWait(v string, max time.Duration) (time.Duration, bool) {
	if wholeSeconds.MatchString(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil && v[0] == '-':
			return 0, false
		case err != nil || n > int64(max/time.Second):
			return max, true
		case n < 0:
			return 0, false
		}
		return min(time.Duration(n)*time.Second, max), true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return min(d, max), true
}

// FuzzQueryParameters: for a query the identity check lets through, the
// wait and configPhase the handler reads are the ones net/url reads (keys
// and values decoded alike), and the wait is the wire contract's: a Go
// duration or whole seconds, lowered to the server's bound, 400 when
// negative, unreadable or given twice.
func FuzzQueryParameters(f *testing.F) {
	for _, q := range []string{
		"host=h1&wait=30",
		"host=h1&wait=30s",
		"host=h1&wait=1m30s",
		"host=h1&wait=-1",
		"host=h1&wait=0",
		"host=h1&wait=abc",
		"host=h1&wait=30&wait=40",
		"host=h1&configPhase=candidate",
		"host=h1&configPhase=current",
		"host=h1&configPhase=candid%61te",
	} {
		f.Add(q)
	}
	const max = 5 * time.Minute
	c := &auth.Claims{Host: "h1", ServiceID: "s1", EnvTag: "prod", ConfigAudience: "agent"}
	f.Fuzz(func(t *testing.T, q string) {
		if _, herr := requestedIdentity(q, c); herr != nil {
			return // refused before wait and phase are read
		}
		vals, err := url.ParseQuery(q)
		if err != nil {
			t.Fatalf("query %q: the identity check accepts what net/url refuses: %v", q, err)
		}
		wait, herr := requestedWait(q, max)
		switch ws := vals["wait"]; len(ws) {
		case 0:
			if herr != nil || wait != 0 {
				t.Fatalf("query %q without wait: wait %s, %v", q, wait, herr)
			}
		case 1:
			want, ok := contractWait(ws[0], max)
			switch {
			case !ok && herr == nil:
				t.Fatalf("query %q: wait %q read as %s, want 400", q, ws[0], wait)
			case ok && herr != nil:
				t.Fatalf("query %q: wait %q refused (%s), want %s", q, ws[0], herr.message, want)
			case ok && wait != want:
				t.Fatalf("query %q: wait %q read as %s, want %s", q, ws[0], wait, want)
			}
		default:
			if herr == nil || herr.status != http.StatusBadRequest {
				t.Fatalf("query %q: wait given %d times read as %s", q, len(ws), wait)
			}
		}
		phase := requestedPhase(q)
		if ps := vals["configPhase"]; len(ps) == 1 {
			want := PhaseCurrent
			if ps[0] == PhaseCandidate {
				want = PhaseCandidate
			}
			if phase != want {
				t.Fatalf("query %q: phase %q, want %q", q, phase, want)
			}
		}
	})
}
