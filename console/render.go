package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/configpub/configpub/internal/safetext"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// templates holds one template set per page, each the layout plus the page.
type templates struct {
	pages map[string]*template.Template
}

var pageNames = []string{"overview", "timeline", "release", "target", "at", "search", "error"}

func parseTemplates() (*templates, error) {
	funcs := template.FuncMap{
		"short": shortDigest,
		"time":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
		"seg":   url.PathEscape,
		"ptime": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"title":     audienceTitle,
		"audiences": func() []string { return []string{"agent", "gateway", "knowledge"} },
		"lower":     func(s string) string { return string(bytes.ToLower([]byte(s))) },
		"itoa":      func(n int64) string { return strconv.FormatInt(n, 10) },
		// plain shows text from commits, operators and runtimes (actors,
		// reasons, refs, paths) with control characters and bidirectional
		// overrides as escapes: HTML escaping alone let "approved\u202e..."
		// display reversed.
		"plain": safetext.Terminal,
	}
	t := &templates{pages: map[string]*template.Template{}}
	for _, name := range pageNames {
		p, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", name, err)
		}
		t.pages[name] = p
	}
	return t, nil
}

// view is what every page template receives.
type view struct {
	Page       string
	Env        string
	User       string
	ShowValues bool
	Data       any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	t := c.tpl.pages[name]
	var buf bytes.Buffer
	err := t.Execute(&buf, view{Page: name, Env: r.PathValue("env"), User: user(r), ShowValues: c.opts.ShowValues, Data: data})
	if err != nil {
		c.opts.Logger.Error("console: render", "page", name, "err", err)
		writeError(w, r, http.StatusInternalServerError, "the page could not be rendered")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(buf.Bytes())
}

// errorPage is what the error page shows: the status line and the message.
type errorPage struct {
	Status  string
	Message string
}

// renderError answers an HTML route's error as a page of the console, with
// a way back, and an /api/ route's as JSON (writeError).
func (c *Console) renderError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeError(w, r, code, msg)
		return
	}
	// The layout links the environment's timeline from a page below it
	// that failed, not when the environment itself is what was not found.
	env := r.PathValue("env")
	if env != "" && (r.URL.Path == "/env/"+url.PathEscape(env) ||
		code == http.StatusNotFound && (strings.Contains(msg, "environment "+env) || strings.Contains(msg, "timeline "+env+":"))) {
		env = ""
	}
	var buf bytes.Buffer
	err := c.tpl.pages["error"].Execute(&buf, view{Page: "error", Env: env, User: user(r), ShowValues: c.opts.ShowValues,
		Data: errorPage{Status: strconv.Itoa(code) + " " + http.StatusText(code), Message: msg}})
	if err != nil {
		writeError(w, r, code, msg)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	return http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
}

// shortDigest shortens "sha256:<hex>" for display; the full value stays in
// the element's title.
func shortDigest(d string) string {
	if len(d) > 7+12 {
		return d[:7+12] + "…"
	}
	return d
}

func audienceTitle(a string) string {
	switch a {
	case "agent":
		return "Agent"
	case "gateway":
		return "Gateway"
	case "knowledge":
		return "Knowledge"
	}
	return a
}
