package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// TestExampleWorkflowsUseTheCLI: every configpub command in the GitHub
// workflows a policy repository copies names an existing verb and only
// its visible (not deprecated) flags, and the promote step uses the
// shipped web-flow keys.
func TestExampleWorkflowsUseTheCLI(t *testing.T) {
	files, err := filepath.Glob("../../examples/github-workflows/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example workflows: %v", err)
	}
	expr := regexp.MustCompile(`\$\{\{[^}]*\}\}`)
	var commands []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var wf struct {
			Jobs map[string]struct {
				Steps []struct {
					Run string `yaml:"run"`
				} `yaml:"steps"`
			} `yaml:"jobs"`
		}
		if err := yaml.Unmarshal(b, &wf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, job := range wf.Jobs {
			for _, step := range job.Steps {
				script := strings.ReplaceAll(step.Run, "\\\n", " ")
				for _, line := range strings.Split(script, "\n") {
					line = strings.TrimSpace(expr.ReplaceAllString(line, "X"))
					if i := strings.Index(line, "configpub "); i >= 0 && (i == 0 || strings.ContainsAny(line[i-1:i], " ($")) {
						line = line[i:]
						if j := strings.IndexAny(line, "|>)"); j >= 0 {
							line = line[:j]
						}
						commands = append(commands, filepath.Base(f)+": "+line)
					}
				}
			}
		}
	}
	sawWebFlow := false
	for _, c := range commands {
		if cmd := checkCLILine(t, c); cmd != nil && cmd.Name() == "promote" {
			v, _ := cmd.Flags().GetString("require-signed-by")
			sawWebFlow = sawWebFlow || v == "github"
		}
	}
	if len(commands) < 4 || !sawWebFlow {
		t.Errorf("found %d configpub commands, promote --require-signed-by github: %v\n%s", len(commands), sawWebFlow, strings.Join(commands, "\n"))
	}
}

// checkCLILine checks one "FILE: configpub VERB ARGS…" line: the verb exists
// and only its canonical flags are used. It returns the parsed verb.
func checkCLILine(t *testing.T, c string) *cobra.Command {
	t.Helper()
	file, line, _ := strings.Cut(c, ": ")
	var args []string
	for _, a := range strings.Fields(line) {
		args = append(args, strings.Trim(a, `"'`))
	}
	root := newRootCmd()
	root.SetErr(io.Discard)
	cmd, rest, err := root.Find(args[1:])
	if err != nil || (cmd == root && !strings.HasPrefix(args[1], "-")) {
		t.Errorf("%s: %q: no such verb", file, line)
		return nil
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: %q: %v", file, line, err)
		return nil
	}
	bad := false
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" {
			t.Errorf("%s: %q uses the old name --%s", file, line, f.Name)
			bad = true
		}
	})
	if bad {
		return nil
	}
	return cmd
}

// envPrefix matches the VAR=value assignments before a command.
var envPrefix = regexp.MustCompile(`^([A-Z_]+=\S*\s+)+`)

// TestDocumentedCommandsUseTheCLI: every configpub command line in a code
// block of README.md and docs/*.md, and in every verb's help examples,
// names a verb and only canonical flags.
func TestDocumentedCommandsUseTheCLI(t *testing.T) {
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inBlock := false
		var lines []string
		for _, l := range strings.Split(strings.ReplaceAll(string(b), "\\\n", " "), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inBlock = !inBlock
				continue
			}
			if inBlock {
				lines = append(lines, l)
			}
		}
		for _, l := range lines {
			l = strings.TrimSpace(l)
			l = envPrefix.ReplaceAllString(strings.TrimPrefix(l, "$ "), "")
			if !strings.HasPrefix(l, "configpub ") {
				continue
			}
			if j := strings.IndexAny(l, "|>#;&"); j >= 0 {
				l = l[:j]
			}
			n++
			checkCLILine(t, filepath.Base(f)+": "+l)
		}
	}
	walkCmds(newRootCmd(), func(c *cobra.Command) {
		for _, l := range strings.Split(strings.ReplaceAll(c.Example, "\\\n", " "), "\n") {
			l = envPrefix.ReplaceAllString(strings.TrimSpace(l), "")
			if !strings.HasPrefix(l, "configpub ") {
				continue
			}
			if j := strings.IndexAny(l, "|>#;&"); j >= 0 {
				l = l[:j]
			}
			n++
			checkCLILine(t, c.CommandPath()+" example: "+l)
		}
	})
	if n < 40 {
		t.Errorf("found only %d documented configpub commands", n)
	}
}
