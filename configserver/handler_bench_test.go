package configserver_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/configpub/configpub/configserver"
)

// BenchmarkHandler measures the per-request CPU cost of the full handler
// (token cache hit, in-memory pointer, cached bytes, headers, access log to
// a JSON handler, metrics) in process, against the baseline handler that
// returns the same bytes from memory with no checks, for 200 and 304.
func BenchmarkHandler(b *testing.B) {
	e := newEnvTB(b, envOptions{handler: configserver.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}})
	sn := e.seed.publish(b, idA, "gateway", 1, benchBody(1))
	e.seed.move(b, sn)
	tg := loadTarget{path: configsPath(idA), token: e.token(b, idA, "gateway"), etag: `"` + sn.ArtifactDigest + `"`, body: sn.Body}
	waitServedB(b, e, tg)
	baseline := baselineHandler([]loadTarget{tg})
	for _, c := range []struct {
		name        string
		h           http.Handler
		conditional bool
	}{
		{"baseline-200", baseline, false},
		{"server-200", e.handler, false},
		{"baseline-304", baseline, true},
		{"server-304", e.handler, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", tg.path, nil)
			req.Header.Set("Authorization", "Bearer "+tg.token)
			want := http.StatusOK
			if c.conditional {
				req.Header.Set("If-None-Match", tg.etag)
				want = http.StatusNotModified
			}
			b.ReportAllocs()
			for b.Loop() {
				w := &discardWriter{h: http.Header{}}
				c.h.ServeHTTP(w, req)
				if w.status != want {
					b.Fatalf("got %d, want %d", w.status, want)
				}
			}
		})
	}
}

// discardWriter is a minimal ResponseWriter for in-process benchmarks.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return len(b), nil
}
