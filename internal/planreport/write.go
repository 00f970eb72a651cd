package planreport

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/configpub/configpub/internal/safetext"
)

// Marker returns the hidden first line of an environment's plan comment. A
// workflow finds its earlier comment by it and edits that one, so each
// environment keeps one comment of its own.
func Marker(envTag string) string {
	// Environment tags are letters, digits and '-': nothing in one can end
	// the comment early (">" is dropped all the same).
	return "<!-- configpub-plan env=" + safetext.Terminal(strings.ReplaceAll(envTag, ">", "")) + " -->"
}

// errWriter remembers the first write error: a report written line by line
// then fails as a whole (a full disk, a closed pipe) instead of being cut
// short with success.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// shown returns a canonical JSON value for display, shortened.
func shown(v json.RawMessage) string {
	if v == nil {
		return "(none)"
	}
	s := string(v)
	if r := []rune(s); len(r) > maxValueText {
		s = string(r[:maxValueText]) + "…"
	}
	return s
}

func because(c Cause) string {
	loc := c.File
	if c.Line > 0 {
		loc = fmt.Sprintf("%s:%d", c.File, c.Line)
	}
	return fmt.Sprintf("%s %s %s (%s)", c.Kind, c.Name, c.Change, loc)
}

// WriteText writes the report for a terminal. Everything from the sources
// is printed with control characters escaped.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	w = ew
	term := safetext.Terminal
	base := fmt.Sprintf("release %d", r.BaseRelease)
	if r.BaseRef != "" {
		base += " at " + term(r.BaseRef)
	}
	fmt.Fprintf(w, "plan %s: %s -> release %d: %d target(s) change (%d added, %d retired), %d unchanged\n",
		term(r.EnvTag), base, r.Release, len(r.Changed), r.AddedTargets, r.RetiredTargets, r.Unchanged)
	if r.NotOnBase != "" {
		fmt.Fprintf(w, "warning: %s\n", term(r.NotOnBase))
	}
	if r.Provisional != "" {
		fmt.Fprintf(w, "note: %s\n", term(r.Provisional))
	}
	if r.PromotableUntil != "" {
		fmt.Fprintf(w, "promotable from %s until %s: %s\n", term(r.PromotableFrom), term(r.PromotableUntil), r.promotableWhy())
	}
	if r.Renewal {
		fmt.Fprintf(w, "renewal: %s\n", r.renewalWhy())
	}
	if r.RollbackUntil != "" {
		fmt.Fprintf(w, "%s\n", r.rollbackSays())
	}
	if len(r.RolloutChanges) > 0 {
		fmt.Fprintf(w, "rollout policy changes (%s):\n", r.rolloutWhen())
		for _, c := range r.RolloutChanges {
			fmt.Fprintf(w, "  ~ %s: %s -> %s\n", term(c.Path), term(shown(c.Old)), term(shown(c.New)))
		}
	}
	for _, t := range r.Changed {
		fmt.Fprintf(w, "\n%s %s/%s (%s %s %s)\n", strings.ToUpper(t.Change), term(t.Host), term(t.ServiceID),
			term(t.Audience), term(t.SubjectKind), term(t.SubjectName))
		if t.Declared != "" {
			fmt.Fprintf(w, "  target declared in %s\n", term(t.Declared))
		}
		if t.Reason != "" {
			fmt.Fprintf(w, "  %s\n", term(t.Reason))
		}
		for _, c := range t.Because {
			fmt.Fprintf(w, "  changed because %s\n", term(because(c)))
		}
		if t.Values == nil {
			for _, x := range []struct {
				sign  string
				paths []string
			}{{"+", t.Added}, {"-", t.Removed}, {"~", t.Modified}} {
				for _, p := range x.paths {
					fmt.Fprintf(w, "  %s %s\n", x.sign, term(p))
				}
			}
		}
		for _, v := range t.Values {
			src := ""
			if v.Source != "" {
				src = "  (" + term(v.Source) + ")"
			}
			if v.Diff != "" {
				fmt.Fprintf(w, "  ~ %s%s\n", term(v.Path), src)
				for _, l := range strings.Split(strings.TrimSuffix(v.Diff, "\n"), "\n") {
					fmt.Fprintf(w, "      %s\n", term(l))
				}
				continue
			}
			if v.Reordered {
				src = " (reordered)" + src
			}
			fmt.Fprintf(w, "  ~ %s: %s -> %s%s\n", term(v.Path), term(shown(v.Old)), term(shown(v.New)), src)
		}
		for _, k := range sortedKeys(t.Digests) {
			fmt.Fprintf(w, "  %-18s %s -> %s\n", k, term(orNone(t.Digests[k].Old)), term(orNone(t.Digests[k].New)))
		}
	}
	return ew.err
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// WriteMarkdown writes the report as one pull-request comment, starting
// with Marker(envTag). Everything that comes from the sources or the
// command line is escaped (code spans nothing can close, table cells
// nothing can split, code blocks whose fence is longer than any backtick
// run inside), so a hostile key or value cannot inject markup.
// promotableWhy says what PromotableFrom and PromotableUntil bound.
func (r *Report) promotableWhy() string {
	why := fmt.Sprintf("promote refuses release %d outside the activation windows of the snapshots it creates (after them, configpub compile --renew writes the next release with new ones)", r.Release)
	if !r.DigestsFinal {
		why += "; provisional like the digests, as they follow the createdAt of the release you commit"
	}
	return why
}

// renewalWhy says what a renewal release does.
func (r *Report) renewalWhy() string {
	hosts := map[string]bool{}
	for _, t := range r.Changed {
		hosts[t.Host] = true
	}
	return fmt.Sprintf("release %d is compiled from the same policy sources as release %d (configpub compile --renew): "+
		"it re-issues the targets whose activation windows ended or are due for renewal (their lease profile's renewBefore and renewSpread), "+
		"and the Gateways and Knowledge services bound to them list the new publications — %d target(s) on %d host(s); "+
		"promote it before the next change, which can then be rolled back to it", r.Release, r.BaseRelease, len(r.Changed), len(hosts))
}

// rollbackSays is the text report's line on the rollback to the base
// release.
func (r *Report) rollbackSays() string {
	if r.RollbackEnded {
		return "no rollback: " + r.rollbackWhy()
	}
	return fmt.Sprintf("rollback to release %d (if it was active; otherwise activate it) until %s: %s", r.RollbackTo, r.RollbackUntil, r.rollbackWhy())
}

// rollbackWhy says what RollbackUntil bounds, or why there is no rollback.
func (r *Report) rollbackWhy() string {
	if r.RollbackEnded && r.Renewal {
		return fmt.Sprintf("once release %d is promoted, configpub rollback to release %d is refused (the first of its "+
			"snapshots' activation windows ended at %s) and not needed: release %d changes no policy source",
			r.Release, r.RollbackTo, r.RollbackUntil, r.Release)
	}
	if r.RollbackEnded {
		return fmt.Sprintf("once release %d is promoted, configpub rollback to release %d is refused: the first of its "+
			"snapshots' activation windows ended at %s, no later than release %d's createdAt, so release %d re-issues "+
			"that target and undoing this change means reverting it; to keep a release to roll back to, renew release %d "+
			"first (configpub compile --renew on the base, promoted before this change; a lease profile's renewBefore "+
			"has the daily renewal do it before the windows end)",
			r.Release, r.RollbackTo, r.RollbackUntil, r.Release, r.Release, r.RollbackTo)
	}
	why := fmt.Sprintf("once release %d is promoted, configpub rollback can move every target back to release %d if it "+
		"was the active release (a release promote recorded without activating it, catching it up, never ran: rollback "+
		"refuses it and configpub activate --release %d moves to it, with an activation's checks) "+
		"until the first of its snapshots' activation windows ends; after it, revert and promote instead", r.Release, r.RollbackTo, r.RollbackTo)
	if !r.DigestsFinal {
		why += " (whether it ends before the promotion follows the createdAt of the release you commit)"
	}
	return why
}

func (r *Report) WriteMarkdown(w io.Writer) error {
	ew := &errWriter{w: w}
	w = ew
	fmt.Fprintf(w, "%s\n### configpub plan %s: release %d -> %d\n\n", Marker(r.EnvTag), safetext.CodeSpan(r.EnvTag), r.BaseRelease, r.Release)
	if r.BaseRef != "" {
		fmt.Fprintf(w, "Base: %s. ", safetext.CodeSpan(r.BaseRef))
	}
	fmt.Fprintf(w, "**%d** target(s) change (**%d** added, **%d** retired), **%d** unchanged.\n",
		len(r.Changed), r.AddedTargets, r.RetiredTargets, r.Unchanged)
	if r.NotOnBase != "" {
		fmt.Fprintf(w, "\n> **Not promotable as it is:** %s\n", safetext.Text(r.NotOnBase))
	}
	if r.Provisional != "" {
		fmt.Fprintf(w, "\n> **Digests are provisional:** %s\n", safetext.Text(r.Provisional))
	}
	if r.PromotableUntil != "" {
		fmt.Fprintf(w, "\n**Promotable** from %s until **%s**: %s.\n", safetext.CodeSpan(r.PromotableFrom),
			safetext.CodeSpan(r.PromotableUntil), safetext.Text(r.promotableWhy()))
	}
	if r.Renewal {
		fmt.Fprintf(w, "\n**Renewal:** %s.\n", safetext.Text(r.renewalWhy()))
	}
	if r.RollbackUntil != "" {
		if r.RollbackEnded {
			fmt.Fprintf(w, "\n> **No rollback:** %s.\n", safetext.Text(r.rollbackWhy()))
		} else {
			fmt.Fprintf(w, "\n**Rollback** to release %d (if it was active; otherwise activate it) until **%s**: %s.\n", r.RollbackTo,
				safetext.CodeSpan(r.RollbackUntil), safetext.Text(r.rollbackWhy()))
		}
	}
	if len(r.RolloutChanges) > 0 {
		fmt.Fprintf(w, "\n**Rollout policy changes** (%s):\n\n", safetext.Text(r.rolloutWhen()))
		for _, c := range r.RolloutChanges {
			fmt.Fprintf(w, "- %s: %s → %s\n", safetext.CodeSpan(c.Path), safetext.CodeSpan(shown(c.Old)), safetext.CodeSpan(shown(c.New)))
		}
	}
	for _, t := range r.Changed {
		fmt.Fprintf(w, "\n#### %s %s (%s %s %s)\n\n", strings.ToUpper(t.Change), safetext.CodeSpan(t.Host+"/"+t.ServiceID),
			safetext.Text(t.Audience), safetext.Text(t.SubjectKind), safetext.CodeSpan(t.SubjectName))
		if t.Declared != "" {
			fmt.Fprintf(w, "Target declared in %s.\n\n", safetext.CodeSpan(t.Declared))
		}
		if t.Reason != "" {
			fmt.Fprintf(w, "%s\n\n", safetext.Text(t.Reason))
		}
		for _, c := range t.Because {
			loc := c.File
			if c.Line > 0 {
				loc = fmt.Sprintf("%s:%d", c.File, c.Line)
			}
			fmt.Fprintf(w, "Changed because %s %s %s (%s).\n\n", safetext.Text(c.Kind), safetext.CodeSpan(c.Name), safetext.Text(c.Change), safetext.CodeSpan(loc))
		}
		if t.Values == nil {
			for _, x := range []struct {
				label string
				paths []string
			}{{"added", t.Added}, {"removed", t.Removed}, {"changed", t.Modified}} {
				for _, p := range x.paths {
					fmt.Fprintf(w, "- %s %s\n", x.label, safetext.CodeSpan(p))
				}
			}
		} else {
			fmt.Fprintf(w, "| path | old | new | source |\n|---|---|---|---|\n")
			for _, v := range t.Values {
				oldV, newV := safetext.CodeCell(shown(v.Old)), safetext.CodeCell(shown(v.New))
				if v.Diff != "" {
					oldV, newV = "see diff", "see diff"
				}
				if v.Reordered {
					newV += " (reordered)"
				}
				src := ""
				if v.Source != "" {
					src = safetext.CodeCell(v.Source)
				}
				fmt.Fprintf(w, "| %s | %s | %s | %s |\n", safetext.CodeCell(v.Path), oldV, newV, src)
			}
			for _, v := range t.Values {
				if v.Diff != "" {
					fmt.Fprintf(w, "\n%s:\n\n", safetext.CodeSpan(v.Path))
					writeFenced(w, "diff", v.Diff)
				}
			}
		}
		fmt.Fprintf(w, "\n<details><summary>digests</summary>\n\n| digest | old | new |\n|---|---|---|\n")
		for _, k := range sortedKeys(t.Digests) {
			fmt.Fprintf(w, "| %s | %s | %s |\n", safetext.Text(k), safetext.CodeCell(orNone(t.Digests[k].Old)), safetext.CodeCell(orNone(t.Digests[k].New)))
		}
		fmt.Fprintf(w, "\n</details>\n")
	}
	return ew.err
}

// writeFenced writes text as a fenced code block that nothing in it can
// close: the fence is longer than any run of backticks in the text, and
// control characters other than newlines are escaped.
func writeFenced(w io.Writer, lang, text string) {
	text = safetext.TerminalLines(strings.TrimSuffix(text, "\n"))
	longest, run := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	fmt.Fprintf(w, "%s%s\n%s\n%s\n", fence, lang, text, fence)
}

// rolloutWhen says when a rollout policy change holds.
func (r *Report) rolloutWhen() string {
	return fmt.Sprintf("they hold once release %d is active; its own promotion and activation are held by the active release's policy", r.Release)
}
