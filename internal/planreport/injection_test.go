package planreport_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/planreport"
)

// hostileKeys are setting keys that try to break out of a Markdown code
// span, start a comment that hides later rows, split a table cell, inject
// HTML, or drive a terminal.
var hostileKeys = []string{
	"code`span",
	"``double` ticks",
	"trailing`",
	" padded ",
	"line\nbreak\n\n## injected heading",
	"<!-- hide everything below",
	"pipe|cell|split",
	"<img src=x onerror=alert(1)>",
	"esc\x1b[2J\x1b[31mred",
	"bidi\u202eevil",
	"slash/and~tilde",
	"cr\rreturn",
}

// hostileValue tries the same from a value: it is shown, escaped, inside
// one table cell.
const hostileValue = "value`\n<!-- HIDDEN -->\n|x|"

func hostileReport(t *testing.T) *planreport.Report {
	t.Helper()
	base, head := fixtureFS(t), fixtureFS(t)
	var add strings.Builder
	add.WriteString("      hostile:\n")
	for _, k := range hostileKeys {
		q, _ := json.Marshal(k)
		v, _ := json.Marshal(hostileValue)
		add.WriteString("        " + string(q) + ": " + string(v) + "\n")
	}
	edit(t, head, "environments/dev.yaml", "      operationalStore:\n", add.String()+"      operationalStore:\n")
	return reportAt(t, base, head, "feature/`evil`\n<!--")
}

// unspan returns the content of a line that must be exactly one code span,
// or fails: a fence of n backticks, content with no run of exactly n
// backticks (which would close it early), the same fence.
func unspan(t *testing.T, line string) string {
	t.Helper()
	n := len(line) - len(strings.TrimLeft(line, "`"))
	if n == 0 || len(line) < 2*n+1 || !strings.HasSuffix(line, strings.Repeat("`", n)) {
		t.Fatalf("not one code span: %q", line)
	}
	inner := line[n : len(line)-n]
	for i := 0; i < len(inner); {
		j := i
		for j < len(inner) && inner[j] == '`' {
			j++
		}
		if j-i == n {
			t.Fatalf("code span %q closes early", line)
		}
		if j == i {
			j++
		}
		i = j
	}
	if len(inner) >= 2 && inner[0] == ' ' && inner[len(inner)-1] == ' ' {
		inner = inner[1 : len(inner)-1]
	}
	return inner
}

func TestPlanMarkdownEscapesHostileKeys(t *testing.T) {
	p := hostileReport(t)
	var md bytes.Buffer
	if err := p.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	out := md.String()
	if strings.ContainsAny(out, "\x1b\r\u202e") {
		t.Errorf("markdown holds raw control characters: %q", out)
	}
	var listed []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "| `"):
			// A value row: path | old | new | source, each one cell.
			cells := splitRow(line)
			if len(cells) != 4 {
				t.Errorf("value row %q has %d cells, want 4", line, len(cells))
				continue
			}
			inner := strings.ReplaceAll(unspan(t, cells[0]), `\|`, "|")
			// The span shows the path with control characters escaped:
			// unquoting gives back the exact JSON pointer.
			u, err := strconv.Unquote(`"` + strings.ReplaceAll(inner, `"`, `\"`) + `"`)
			if err != nil {
				t.Fatalf("span %q: %v", inner, err)
			}
			listed = append(listed, u)
			if strings.Contains(line, "HIDDEN") && !strings.Contains(unspan(t, cells[2]), "HIDDEN") {
				t.Errorf("hostile value not inside its cell's code span: %q", line)
			}
		case strings.HasPrefix(line, "|"):
			if cells := splitRow(line); len(cells) != 3 && len(cells) != 4 {
				t.Errorf("table row %q has %d cells", line, len(cells))
			}
		case strings.HasPrefix(line, "<!-- configpub-plan env=dev -->"), strings.HasPrefix(line, "> **Digests are provisional:**"),
			strings.HasPrefix(line, "**Promotable** from `"), strings.HasPrefix(line, "**Rollback** to release "),
			strings.HasPrefix(line, "> **No rollback:** "), strings.HasPrefix(line, "**Renewal:** "),
			line == "<details><summary>digests</summary>", line == "</details>", strings.HasPrefix(line, "Changed because "):
		case strings.HasPrefix(line, "Base: "):
			rest := strings.TrimPrefix(line, "Base: ")
			span, tail, _ := strings.Cut(rest, ". **")
			if got := unspan(t, span); !strings.Contains(got, `\n<!--`) {
				t.Errorf("base ref shown as %q", got)
			}
			if !strings.Contains(tail, "target(s) change") {
				t.Errorf("summary lost after the base ref: %q", line)
			}
		case line == "", strings.HasPrefix(line, "### "), strings.HasPrefix(line, "#### "):
		default:
			t.Errorf("line not produced by the plan layout (an injection?): %q", line)
		}
	}
	// Every hostile key is listed, as an RFC 6901 pointer, on its own line.
	want := map[string]bool{}
	for _, k := range hostileKeys {
		want["/hostile."+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")] = true
	}
	for _, l := range listed {
		delete(want, l)
	}
	if len(want) > 0 {
		t.Errorf("paths missing from the markdown list: %v (listed %q)", want, listed)
	}
	if !strings.Contains(out, "slash~1and~0tilde") {
		t.Errorf("JSON pointer not escaped per RFC 6901")
	}
}

func TestPlanTextEscapesHostileKeys(t *testing.T) {
	p := hostileReport(t)
	var text bytes.Buffer
	if err := p.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	if strings.ContainsAny(out, "\x1b\r\u202e") {
		t.Errorf("text plan holds raw control characters: %q", out)
	}
	for _, want := range []string{`esc\x1b[2J\x1b[31mred`, `line\nbreak\n\n## injected heading`, `bidi\u202eevil`, `cr\rreturn`} {
		if !strings.Contains(out, want) {
			t.Errorf("text plan lacks the escaped key %s", want)
		}
	}
}

// splitRow splits a Markdown table row at its unescaped pipes.
func splitRow(line string) []string {
	var cells []string
	start := -1
	for i := 0; i < len(line); i++ {
		if line[i] == '|' && (i == 0 || line[i-1] != '\\') {
			if start >= 0 {
				cells = append(cells, strings.TrimSpace(line[start:i]))
			}
			start = i + 1
		}
	}
	return cells
}
