package main

import (
	"bytes"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// notReporting are the verbs that print no result a script would read,
// with why; every other runnable verb must take -o/--output json.
var notReporting = map[string]string{
	"configpub serve":          "a server: runs until interrupted, logs to stderr",
	"configpub registry serve": "a server: runs until interrupted, logs to stderr",
	"configpub console":        "a server: runs until interrupted, logs to stderr",
	"configpub demo":           "a narrated walkthrough for people",
	"configpub token":          "prints the token itself, for $(configpub token …)",
	"configpub workflow diff":  "prints the document (a side-by-side diff)",
}

func walkCmds(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, s := range c.Commands() {
		walkCmds(s, f)
	}
}

// TestOneFlagVocabulary: over the whole cobra tree (so it also covers flags
// added later), no visible flag uses a name that another concept's
// canonical name replaced; every old name left is a hidden, deprecated
// alias of its canonical flag; and one concept has one name: a flag name
// carries one usage meaning wherever it appears, checked by the concepts
// that used to be split.
func TestOneFlagVocabulary(t *testing.T) {
	root := newRootCmd()
	walkCmds(root, func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			canon, renamed := canonicalName(c, f.Name)
			if !renamed {
				return
			}
			if !f.Hidden || f.Deprecated == "" {
				t.Errorf("%s: --%s is shown; the name for it is --%s", c.CommandPath(), f.Name, canon)
			}
			nf := c.Flags().Lookup(canon)
			if nf == nil {
				t.Errorf("%s: alias --%s without its canonical --%s", c.CommandPath(), f.Name, canon)
			}
		})
	})
	// Each concept that had two names (or one name for two things) now has one.
	for _, c := range []struct {
		verb, flag, wantInUsage string
	}{
		{"configpub promote", "repo", "Git"},
		{"configpub compile", "repo", "policy repository"},
		{"configpub fetch", "env", "envTag"},
		{"configpub token", "env", "env"},
		{"configpub verify-oci", "env", "env-tag"},
		{"configpub fetch", "config-audience", "agent, gateway or knowledge"},
		{"configpub validate", "config-audience", "audience"},
		{"configpub token", "config-audience", "agent, gateway or knowledge"},
		{"configpub verify-oci", "trust-key", "cosign.pub"},
		{"configpub fetch", "trust-key", "cosign.pub"},
		{"configpub registry serve", "listen", "listen"},
		{"configpub serve", "listen", "listen"},
		{"configpub rollback", "release", "release"},
		{"configpub activate", "release", "release"},
		// One name for a repeat interval (was --every, --poll and --interval).
		{"configpub lease renew", "interval", "repeat at this interval"},
		{"configpub gate", "interval", "how often each environment is checked"},
		{"configpub fetch", "interval", "polling interval"},
	} {
		cmd, _, err := root.Find(strings.Fields(c.verb)[1:])
		if err != nil || cmd.CommandPath() != c.verb {
			t.Errorf("%s: not found", c.verb)
			continue
		}
		f := cmd.Flags().Lookup(c.flag)
		if f == nil || f.Hidden || !strings.Contains(f.Usage, c.wantInUsage) {
			t.Errorf("%s --%s: %+v", c.verb, c.flag, f)
		}
	}
}

// TestOneRepeatIntervalName: a visible duration flag that says how often a
// verb repeats or checks is named --interval on every verb (so a flag added
// later as --every, --poll or --period fails here).
func TestOneRepeatIntervalName(t *testing.T) {
	repeat := regexp.MustCompile(`(?i)how often|repeat|polling|poll `)
	seen := 0
	walkCmds(newRootCmd(), func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Value.Type() != "duration" || !repeat.MatchString(f.Usage) {
				return
			}
			seen++
			if f.Name != "interval" {
				t.Errorf("%s --%s (%q) is a repeat interval: name it --interval", c.CommandPath(), f.Name, f.Usage)
			}
		})
	})
	if seen < 3 {
		t.Errorf("found %d repeat-interval flags, want at least lease renew, gate and fetch", seen)
	}
}

// TestOldFlagNamesStillWork: an old name sets the canonical flag (required
// checks included) and prints a deprecation note on stderr.
func TestOldFlagNamesStillWork(t *testing.T) {
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"plan", "--repo", t.TempDir(), "--env", "dev", "--format", "yaml"})
	err := root.Execute()
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), `--output "yaml"`) {
		t.Fatalf("plan --format yaml: %v (exit %d); want the --output usage error", err, exitCode(err))
	}
	if !strings.Contains(errOut.String()+out.String(), "Flag --format has been deprecated, use --output instead") {
		t.Errorf("no deprecation note: %q", errOut.String())
	}
	if strings.Contains(root.Commands()[0].UsageString(), "--format") {
		t.Errorf("help shows --format")
	}
}

// TestEveryReportingVerbHasOutputJSON and an example for every verb.
func TestEveryReportingVerbHasOutputJSON(t *testing.T) {
	root := newRootCmd()
	walkCmds(root, func(c *cobra.Command) {
		if !c.Runnable() || c == root {
			return
		}
		f := c.Flags().Lookup("output")
		has := f != nil && f.Shorthand == "o" && strings.Contains(f.Usage, "json")
		why, excepted := notReporting[c.CommandPath()]
		switch {
		case !has && !excepted:
			t.Errorf("%s has no -o/--output json", c.CommandPath())
		case has && excepted:
			t.Errorf("%s has -o/--output json but is listed as not reporting (%s): drop it from notReporting", c.CommandPath(), why)
		}
	})
	var missing []string
	walkCmds(root, func(c *cobra.Command) {
		if c.Runnable() && c != root && c.Example == "" {
			missing = append(missing, c.CommandPath())
		}
	})
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("verbs without an example: %v", missing)
	}
	// fetch prints only JSON lines: -o json is its one format, -o text is refused.
	if _, err := runCLI("fetch", "-o", "text", "--server", "http://127.0.0.1:1", "--host", "h", "--service-id", "s", "--env", "e",
		"--config-audience", "agent", "--trust-key", "k", "--out", "o", "--cache-dir", t.TempDir()); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "want json") {
		t.Errorf("fetch -o text: %v", err)
	}
	for _, name := range []string{"verbose", "quiet"} {
		if f := root.PersistentFlags().Lookup(name); f == nil || f.Shorthand != name[:1] {
			t.Errorf("no global -%s/--%s", name[:1], name)
		}
	}
}
