package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// exampleCommands returns the configpub invocations of an Example text:
// continuation lines joined, comments and leading VAR=value assignments
// dropped, arguments split on spaces outside double quotes.
func exampleCommands(ex string) [][]string {
	var out [][]string
	joined := strings.ReplaceAll(ex, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if i := strings.Index(line, " # "); i >= 0 {
			line = line[:i]
		}
		var args []string
		var cur strings.Builder
		quoted := false
		flush := func() {
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		}
		for _, r := range line {
			switch {
			case r == '"':
				quoted = !quoted
			case r == ' ' && !quoted:
				flush()
			default:
				cur.WriteRune(r)
			}
		}
		flush()
		for len(args) > 0 && strings.Contains(args[0], "=") {
			args = args[1:]
		}
		if len(args) > 0 && args[0] == "configpub" {
			out = append(out, args[1:])
		}
	}
	return out
}

// TestEveryVerbHasAnExampleThatParses walks the command tree: every runnable
// verb has an example, every top-level verb a help group, and every example
// names an existing verb with flags that verb accepts.
func TestEveryVerbHasAnExampleThatParses(t *testing.T) {
	root := newRootCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Parent() == root && c.GroupID == "" {
			t.Errorf("%s is in no help group (add it to verbGroup)", c.CommandPath())
		}
		if c.Runnable() && c != root {
			cmds := exampleCommands(c.Example)
			if len(cmds) == 0 {
				t.Errorf("%s has no example (set Example or add it to verbExamples)", c.CommandPath())
			}
			for _, args := range cmds {
				found, rest, err := newRootCmd().Find(args)
				if err != nil {
					t.Errorf("%s example %q: %v", c.CommandPath(), args, err)
					continue
				}
				if err := found.ParseFlags(rest); err != nil {
					t.Errorf("%s example %q: %v", c.CommandPath(), args, err)
				}
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

func TestExampleCommands(t *testing.T) {
	got := exampleCommands("  COSIGN_PASSWORD=x configpub a --b \"c d\" \\\n      --e f   # note\n  make demo\n")
	if len(got) != 1 || strings.Join(got[0], "|") != "a|--b|c d|--e|f" {
		t.Fatalf("got %q, want [[a --b c d --e f]]", got)
	}
}
