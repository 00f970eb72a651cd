package configserver

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/configpub/configpub/configserver/auth"
)

// reqLog collects what the access log may show about one request:
// identifiers, status and size. It never holds a token or a body.
type reqLog struct {
	method      string
	route       string
	claims      *auth.Claims
	snapshotID  string
	notModified bool
	reason      string
	err         error
	parked      bool // a held watch took the connection over (see park)
	start       time.Time
}

// requestState holds both per-request records in one allocation.
type requestState struct {
	reqLog       reqLog
	statusWriter statusWriter
}

// statusWriter records the status and the number of body bytes written.
type statusWriter struct {
	http.ResponseWriter
	status int
	size   int
	date   func() time.Time // when set, the clock of the answer's Date header
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.setDate()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.setDate()
	}
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

// setDate sets the Date header from the handler's clock, as the headers
// are written, when it has one of its own.
func (w *statusWriter) setDate() {
	if w.date != nil {
		w.Header().Set("Date", w.date().UTC().Format(http.TimeFormat))
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// AccessLogMode selects the requests that get an access-log record.
type AccessLogMode int

// Access-log modes (see Options.AccessLog).
const (
	AccessLogAll      AccessLogMode = iota // every request
	AccessLogFailures                      // requests answered 4xx or 5xx
	AccessLogNone                          // none
)

// ParseAccessLogMode parses "all", "failures" or "none".
func ParseAccessLogMode(s string) (AccessLogMode, error) {
	switch s {
	case "all":
		return AccessLogAll, nil
	case "failures":
		return AccessLogFailures, nil
	case "none":
		return AccessLogNone, nil
	}
	return 0, fmt.Errorf("access log %q: want all, failures or none", s)
}

// String returns the mode's name, as ParseAccessLogMode reads it.
func (m AccessLogMode) String() string {
	switch m {
	case AccessLogFailures:
		return "failures"
	case AccessLogNone:
		return "none"
	}
	return "all"
}

// accessLog writes one record per request the access-log mode selects.
// Errors are logged by their reason and wrapped cause, which never contain
// a token or a body.
func (h *handler) accessLog(r *http.Request, rl *reqLog, status, size int, d time.Duration) {
	switch {
	case h.accessLogMode == AccessLogNone,
		h.accessLogMode == AccessLogFailures && status < 400:
		return
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	ctx := r.Context()
	if !h.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 14)
	attrs = append(attrs,
		slog.String("method", rl.method),
		slog.String("route", rl.route),
		slog.Int("status", status),
		slog.Int("bytes", size),
		slog.Duration("duration", d),
		slog.String("remote", r.RemoteAddr),
	)
	if c := rl.claims; c != nil {
		attrs = append(attrs,
			slog.String("host", c.Host),
			slog.String("serviceId", c.ServiceID),
			slog.String("envTag", c.EnvTag),
			slog.String("audience", c.ConfigAudience),
		)
	}
	if rl.snapshotID != "" {
		attrs = append(attrs, slog.String("snapshotId", rl.snapshotID))
	}
	if rl.notModified {
		attrs = append(attrs, slog.Bool("notModified", true))
	}
	if rl.reason != "" {
		attrs = append(attrs, slog.String("reason", rl.reason))
	}
	if rl.err != nil {
		attrs = append(attrs, slog.String("err", rl.err.Error()))
	}
	h.log.LogAttrs(ctx, level, "request", attrs...)
}
