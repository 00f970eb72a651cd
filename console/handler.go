package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler returns the console's routes:
//
//	GET /                                     environments overview
//	GET /env/{env}                            publication timeline (?before=N pages)
//	GET /env/{env}/releases/{n}[?from=N&against=base|current] release and its diff against its base or the current release (changed targets paged)
//	GET /env/{env}/targets/{host}/{service}   target: pointer, history, evidence, lease
//	GET /env/{env}/at?t=TIME[&host=&service=|&from=N] time travel
//	GET /targets?q=PREFIX[&env=E][&from=N]    target search (host/serviceId or serviceId prefix)
//	GET /api/...                              the same data as JSON (see README)
//	GET /events[?env=]                        server-sent events: "change"
//	GET /metrics                              Prometheus metrics
//	GET /healthz                              liveness (no authentication)
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	page := func(route, pattern string, h func(http.ResponseWriter, *http.Request) (string, any, error)) {
		mux.Handle("GET "+pattern, c.instrument(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name, data, err := h(w, r)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			c.render(w, r, name, data)
		})))
	}
	api := func(route, pattern string, h func(http.ResponseWriter, *http.Request) (string, any, error)) {
		mux.Handle("GET "+pattern, c.instrument(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, data, err := h(w, r)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			c.writeJSON(w, r, http.StatusOK, data)
		})))
	}
	for _, p := range []struct {
		route, html, json string
		h                 func(http.ResponseWriter, *http.Request) (string, any, error)
	}{
		{"overview", "/{$}", "/api/environments", c.overview},
		{"timeline", "/env/{env}", "/api/environments/{env}/timeline", c.timeline},
		{"release", "/env/{env}/releases/{n}", "/api/environments/{env}/releases/{n}", c.release},
		{"target", "/env/{env}/targets/{host}/{service}", "/api/environments/{env}/targets/{host}/{service}", c.target},
		{"at", "/env/{env}/at", "/api/environments/{env}/at", c.at},
		{"search", "/targets", "/api/targets", c.search},
	} {
		page(p.route, p.html, p.h)
		api("api_"+p.route, p.json, p.h)
	}
	// Any other /api/ path is a JSON 404, as every API error is.
	mux.Handle("/api/", c.instrument("api_unknown", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusNotFound, "no such API path")
	})))
	mux.Handle("GET /events", http.HandlerFunc(c.events))
	mux.Handle("GET /metrics", c.instrument("metrics", promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{Registry: c.reg})))
	mux.Handle("GET /static/", c.instrument("static", staticHandler()))
	authed := c.authenticate(mux)
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	root.Handle("/", authed)
	return secure(cleanPath(root))
}

// cleanPath answers 400 for a path, or a query parameter's name or value,
// that holds a NUL or is not UTF-8 (after decoding): no environment, host
// or service is named so, and PostgreSQL refuses such text with an error
// that was logged and answered 500.
func cleanPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !cleanText(r.URL.Path) {
			writeError(w, r, http.StatusBadRequest, "the path is not UTF-8 text")
			return
		}
		for k, vs := range r.URL.Query() {
			switch {
			case !cleanText(k):
				writeError(w, r, http.StatusBadRequest, "a query parameter's name is not text (UTF-8 without NUL)")
				return
			case slices.ContainsFunc(vs, func(v string) bool { return !cleanText(v) }):
				name := k
				if len(name) > 32 || strings.ContainsFunc(name, unicode.IsControl) {
					name = "a query parameter"
				}
				writeError(w, r, http.StatusBadRequest, name+" is not text (UTF-8 without NUL)")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cleanText reports whether s is UTF-8 text without a NUL.
func cleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// secure sets the headers every response carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if !strings.HasPrefix(r.URL.Path, "/static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

func (c *Console) overview(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	v, err := c.pc.get("overview", func() (any, error) { return c.rd.Environments(r.Context()) })
	return "overview", v, err
}

func (c *Console) timeline(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	before, err := optInt(r, "before")
	if err != nil {
		return "", nil, err
	}
	env := r.PathValue("env")
	v, err := c.pc.get(fmt.Sprintf("timeline\x00%s\x00%d", env, before), func() (any, error) {
		return c.rd.Timeline(r.Context(), env, before)
	})
	return "timeline", v, err
}

func (c *Console) release(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	n, err := strconv.ParseInt(r.PathValue("n"), 10, 64)
	if err != nil || n <= 0 {
		return "", nil, badRequest("release number %q is not a positive integer", r.PathValue("n"))
	}
	from, err := optInt(r, "from")
	if err != nil {
		return "", nil, err
	}
	against := r.URL.Query().Get("against")
	switch against {
	case "":
		against = AgainstBase
	case AgainstBase, AgainstCurrent:
	default:
		return "", nil, badRequest("against=%q is neither %q nor %q", against, AgainstBase, AgainstCurrent)
	}
	dq := DiffQuery{From: int(min(from, 1<<30)), Against: against,
		Audience: strings.TrimSpace(r.URL.Query().Get("audience")), Host: strings.TrimSpace(r.URL.Query().Get("host"))}
	for name, v := range map[string]string{"audience": dq.Audience, "host": dq.Host} {
		if len(v) > maxQueryLen { // not UTF-8, or with a NUL: 400 from cleanPath
			return "", nil, badRequest("%s is not text of at most %d bytes", name, maxQueryLen)
		}
	}
	// host is the start of a host name and audience one of agent, gateway
	// and knowledge, both lowercase by their grammar: typed in capitals
	// they mean the same.
	dq.Host, dq.Audience = strings.ToLower(dq.Host), strings.ToLower(dq.Audience)
	env := r.PathValue("env")
	v, err := c.pc.get(fmt.Sprintf("release\x00%s\x00%d\x00%d\x00%s\x00%q\x00%q", env, n, dq.From, dq.Against, dq.Audience, dq.Host), func() (any, error) {
		return c.rd.ReleaseDetailOf(r.Context(), env, n, dq)
	})
	return "release", v, err
}

func (c *Console) target(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	d, err := c.rd.TargetDetail(r.Context(), r.PathValue("env"), r.PathValue("host"), r.PathValue("service"))
	return "target", d, err
}

// atPage is the time-travel page's data: the form's values and one answer.
type atPage struct {
	EnvTag    string         `json:"-"`
	Input     string         `json:"-"`
	Host      string         `json:"-"`
	ServiceID string         `json:"-"`
	Identity  *IdentityAt    `json:"identity,omitempty"`
	Env       *EnvironmentAt `json:"environment,omitempty"`
}

func (c *Console) at(_ http.ResponseWriter, r *http.Request) (string, any, error) {
	q := r.URL.Query()
	p := &atPage{EnvTag: r.PathValue("env"), Input: q.Get("t"), Host: q.Get("host"), ServiceID: q.Get("service")}
	if p.Input == "" {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			return "", nil, badRequest("query parameter t (RFC 3339 time) is required")
		}
		return "at", p, nil
	}
	t, err := parseTime(p.Input)
	if err != nil {
		return "", nil, err
	}
	if (p.Host == "") != (p.ServiceID == "") {
		return "", nil, badRequest("host and service go together")
	}
	if p.Host != "" {
		p.Identity, err = c.rd.IdentityAt(r.Context(), p.EnvTag, p.Host, p.ServiceID, t)
	} else {
		from, ferr := optInt(r, "from")
		if ferr != nil {
			return "", nil, ferr
		}
		var v any
		v, err = c.pc.get(fmt.Sprintf("at\x00%s\x00%d\x00%d", p.EnvTag, t.UnixNano(), from), func() (any, error) {
			return c.rd.EnvironmentAt(r.Context(), p.EnvTag, t, int(from))
		})
		p.Env, _ = v.(*EnvironmentAt)
	}
	return "at", p, err
}

// parseTime accepts RFC 3339 (with or without fractional seconds), the
// browser's datetime-local form (taken as UTC), and either with a space for
// the T — as the console's pages show times ("2026-01-05 11:30:00Z"), so a
// time copied from a page is a moment to travel to.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) > len("2006-01-02") && s[len("2006-01-02")] == ' ' {
		s = s[:len("2006-01-02")] + "T" + s[len("2006-01-02")+1:]
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			// An offset can carry a time of year 9999 or 0000 beyond
			// them, which no page or JSON answer can show.
			if y := t.UTC().Year(); y < 1 || y > 9999 {
				return time.Time{}, badRequest("time %q is outside the years 0001 to 9999 in UTC", s)
			}
			return t.UTC(), nil
		}
	}
	return time.Time{}, badRequest("time %q is not RFC 3339 (2006-01-02T15:04:05Z, or with a space for the T as the pages show times) or 2006-01-02T15:04:05 (UTC)", s)
}

func optInt(r *http.Request, name string) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("%s=%q is not a non-negative integer", name, s)
	}
	return n, nil
}

// writeJSON answers code with v as indented JSON, encoded whole before
// the status is sent: a value that cannot be encoded (a time outside the
// years 0000 to 9999, say, read from the database) is logged and answered
// 500 with a JSON error, not a 200 with an empty body.
// The buffer is bounded as the answers are: every list an answer holds is
// read with a LIMIT (the overview has one entry per environment).
func (c *Console) writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	b, err := encodeJSON(v)
	if err != nil {
		c.opts.Logger.Error("console: could not encode a JSON answer", "path", r.URL.Path, "err", err)
		writeError(w, r, http.StatusInternalServerError, "the console could not encode its answer")
		return
	}
	writeJSONBytes(w, code, b)
}

// encodeJSON encodes v as the console's JSON answers are: indented, with
// a final newline.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return buf.Bytes(), nil
}

// writeJSONBytes answers code with the encoded JSON b.
func writeJSONBytes(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		c.renderError(w, r, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrBadRequest):
		c.renderError(w, r, http.StatusBadRequest, err.Error())
	default:
		// Database errors may name internals: logged, not shown.
		c.opts.Logger.Error("console: read failed", "path", r.URL.Path, "err", err)
		c.renderError(w, r, http.StatusInternalServerError, "the console could not read the release store")
	}
}

// writeError answers JSON for /api/ and plain text otherwise.
func writeError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		b, err := encodeJSON(map[string]string{"error": msg})
		if err != nil { // a map of strings always encodes
			b = []byte("{\"error\": \"internal error\"}\n")
		}
		writeJSONBytes(w, code, b)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}
