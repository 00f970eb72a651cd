package registry

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// ServerDate holds the Date header of the registry's latest answer to a
// request made under a context from WithServerDate: the registry's clock,
// to the second. It is not authenticated; a runtime uses it only to name
// its own clock as the cause of a lease refusal.
type ServerDate struct {
	mu sync.Mutex
	t  time.Time
}

// Time returns the latest Date recorded; zero when none was (no answer
// carried one, or the repositories are not remote).
func (d *ServerDate) Time() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.t
}

func (d *ServerDate) record(h http.Header) {
	t, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.t = t
}

type serverDateKey struct{}

// WithServerDate returns a context under which the Date header of every
// answer the Client receives is recorded in the returned ServerDate.
func WithServerDate(ctx context.Context) (context.Context, *ServerDate) {
	d := &ServerDate{}
	return context.WithValue(ctx, serverDateKey{}, d), d
}

// dateRecorder records each answer's Date in the ServerDate of its
// request's context, when it has one.
type dateRecorder struct{ base http.RoundTripper }

func (r dateRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if resp != nil {
		if d, ok := req.Context().Value(serverDateKey{}).(*ServerDate); ok {
			d.record(resp.Header)
		}
	}
	return resp, err
}
