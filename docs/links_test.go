package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	linkRE    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#+ (.+)$`)
	anchorRE  = regexp.MustCompile(`<a id="([^"]+)"></a>`)
	codeRE    = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
)

// slug is the anchor GitHub derives from a heading.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func anchors(md string) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(md, -1) {
		out[slug(m[1])] = true
	}
	for _, m := range anchorRE.FindAllStringSubmatch(md, -1) {
		out[m[1]] = true
	}
	return out
}

// TestRelativeLinks checks that every relative link of the documentation and
// of the README points at an existing file and, with a fragment, at an
// existing heading or anchor of that file.
func TestRelativeLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := codeRE.ReplaceAllString(string(b), "")
		for _, m := range linkRE.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(filepath.Dir(f), file)
			}
			tb, err := os.ReadFile(path)
			if err != nil {
				if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
					continue
				}
				t.Errorf("%s: link %s: %v", f, target, err)
				continue
			}
			if frag != "" && strings.HasSuffix(path, ".md") && !anchors(codeRE.ReplaceAllString(string(tb), ""))[frag] {
				t.Errorf("%s: link %s: no heading or anchor %q in %s", f, target, frag, path)
			}
		}
	}
}
