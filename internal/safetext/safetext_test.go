package safetext

import (
	"strings"
	"testing"
)

func TestTerminal(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode ✓": "plain text, ünïcode ✓",
		"a\x1b[2Jb":             `a\x1b[2Jb`,
		"tab\tnl\ncr\r":         `tab\tnl\ncr\r`,
		"c1\u009b31m":           `c1\u009b31m`,
		"bidi\u202eevil\u2066":  `bidi\u202eevil\u2066`,
		"zero\u200bwidth":       `zero\u200bwidth`,
		"bad\xffutf8":           `bad\xffutf8`,
		`back\x1bslash`:         `back\\x1bslash`,
		"del\x7f":               `del\x7f`,
		"line\u2028sep":         `line\u2028sep`,
	} {
		if got := Terminal(in); got != want {
			t.Errorf("Terminal(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSlack(t *testing.T) {
	for in, want := range map[string]string{
		"plain subject":                   "plain subject",
		"<!here> please look":             "&lt;!here&gt; please look",
		"<https://evil.example|Approved>": "&lt;https://evil.example|Approved&gt;",
		"&amp; already escaped":           "&amp;amp; already escaped",
		"two\nlines\u202e":                `two\nlines\u202e`,
	} {
		if got := Slack(in); got != want {
			t.Errorf("Slack(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTerminalLines(t *testing.T) {
	in := "two problems:\n\tkey \"a\x1b[2Jb\": bad\n\tpattern ^[^\\s]+$\u202e"
	want := "two problems:\n\tkey \"a\\x1b[2Jb\": bad\n\tpattern ^[^\\s]+$\\u202e"
	if got := TerminalLines(in); got != want {
		t.Errorf("TerminalLines = %q, want %q", got, want)
	}
}

func TestCodeSpan(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b":      "`/a/b`",
		"a`b":       "``a`b``",
		"``x`":      "``` ``x` ```",
		" padded ":  "`  padded  `",
		"":          "` `",
		"x\n\n<!--": "`x\\n\\n<!--`",
		"p|q":       "`p|q`",
	} {
		if got := CodeSpan(in); got != want {
			t.Errorf("CodeSpan(%q) = %q, want %q", in, got, want)
		}
	}
	if got := CodeCell("p|q`"); got != "`` p\\|q` ``" {
		t.Errorf("CodeCell = %q", got)
	}
}

func TestText(t *testing.T) {
	got := Text("a*b_<!--x-->[l](u)|`c`\n")
	if want := `a\*b\_\<\!\-\-x\-\-\>\[l\]\(u\)\|\` + "`c\\`" + `\\n`; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	if strings.ContainsAny(Text("\x1b"), "\x1b") {
		t.Error("control character kept")
	}
}

func TestHasControl(t *testing.T) {
	for in, want := range map[string]bool{
		"agents/a.yaml":           false,
		"ünïcode/✓.yaml":          false,
		`back\slash.yaml`:         false,
		"x\n::error title=PWN::y": true,
		"tab\t.yaml":              true,
		"del\x7f":                 true,
		"c1\u0085":                true,
		"bidi\u202e.yaml":         true,
		"zero\u200bwidth":         true,
		"line\u2029sep":           true,
		"bad\xffutf8":             true,
	} {
		if got := HasControl(in); got != want {
			t.Errorf("HasControl(%q) = %v, want %v", in, got, want)
		}
	}
}
