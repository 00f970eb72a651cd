// Package safetext makes untrusted text (setting keys, commit subjects,
// reasons, branch names) safe to print: on a terminal, where an escape
// sequence could rewrite the screen, in a chat message, where markup could
// ping a channel or disguise a link, and in Markdown, where a backtick,
// newline, pipe, "<!--" or HTML could break out of a code span, hide the
// rows after it or inject markup into a pull-request comment.
//
// Every function keeps the text readable: a character that is not safe is
// shown as a Go escape (\x1b, \n, \u202e), never dropped, so two different
// inputs never print the same.
package safetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Terminal returns s with every control character (C0, DEL, C1), Unicode
// format character (bidirectional overrides, zero-width characters), line or
// paragraph separator, and invalid UTF-8 byte replaced by its Go escape.
// A backslash is doubled, so no escape can be forged; other text prints
// unchanged.
func Terminal(s string) string { return terminal(s, false) }

// Slack returns s as Terminal does, with &, < and > written &amp;, &lt;
// and &gt;, as Slack (and the chat tools that take its incoming-webhook
// format) require of message text: a commit subject or an actor must not
// be able to post an @here ping (<!here>) or a link under a false label
// (<https://example.com|Approved>).
func Slack(s string) string {
	return slackEscaper.Replace(Terminal(s))
}

var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// TerminalLines is Terminal for multi-line messages (an error listing
// several problems): newlines and tabs are kept and backslashes are left
// alone (a message may quote a pattern); every other control character is
// escaped.
func TerminalLines(s string) string { return terminal(s, true) }

func terminal(s string, lines bool) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\\' && !lines:
			b.WriteString(`\\`)
		case lines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r) // e.g. '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isPlain: nothing in s needs escaping (the common case, no allocation).
func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			for _, r := range s[i:] {
				if r == utf8.RuneError || r == '\\' || unsafeRune(r) {
					return false
				}
			}
			return true
		}
		if c < 0x20 || c == 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

// HasControl reports whether s holds a character Terminal would escape
// other than a backslash: a control character (C0, DEL, C1), a Unicode
// format character, a line or paragraph separator, or a byte that is not
// UTF-8. A name holding one (a file name) prints differently from what it
// is, or not at all.
func HasControl(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

func unsafeRune(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}

// CodeSpan returns s as one Markdown inline code span that nothing in s can
// close or break: control characters (newlines included) are escaped as by
// Terminal, and the fence is one backtick longer than the longest run of
// backticks in s. Use CodeCell inside a table.
func CodeSpan(s string) string { return codeSpan(Terminal(s)) }

// CodeCell is CodeSpan for a table cell: a pipe is written "\|", which a
// GitHub-flavoured Markdown table shows as "|" inside the cell instead of
// starting a new one.
func CodeCell(s string) string {
	return codeSpan(strings.ReplaceAll(Terminal(s), "|", `\|`))
}

func codeSpan(s string) string {
	if s == "" {
		return "` `"
	}
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	// A leading or trailing backtick would join the fence; one space on each
	// side is stripped by the renderer.
	if s[0] == '`' || s[len(s)-1] == '`' || s[0] == ' ' || s[len(s)-1] == ' ' {
		s = " " + s + " "
	}
	return fence + s + fence
}

// Text returns s as inline Markdown text: control characters escaped as by
// Terminal, every ASCII punctuation character backslash-escaped (so no
// emphasis, link, code span, HTML, comment or table cell can start), and
// nothing else changed.
func Text(s string) string {
	s = Terminal(s)
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x80 && unicode.IsPunct(rune(c)) || c < 0x80 && unicode.IsSymbol(rune(c)) {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
