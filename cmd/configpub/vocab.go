package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// One CLI vocabulary: one flag name per concept across every verb. A verb
// that defines a flag under an older name (or one added later under a
// non-canonical name) gets the canonical name here; the old name keeps
// working for one release, hidden from help, and prints a deprecation note
// on stderr when used.

// renames maps an old flag name to its canonical name on every verb.
var renames = map[string]string{
	"git":        "repo",     // the policy repository directory
	"env-tag":    "env",      // the environment tag
	"format":     "output",   // text / json (/ markdown) output
	"addr":       "listen",   // the address a server listens on
	"to-release": "release",  // the release a command moves to
	"every":      "interval", // how often a repeating verb runs (lease renew)
	"poll":       "interval", // how often a watching verb checks (gate)
}

// verbRenames are renames on one verb only, where the old name means
// another thing elsewhere.
var verbRenames = map[string]map[string]string{
	// --key is a private signing key elsewhere; here it is the trusted public key.
	"configpub verify-oci": {"key": "trust-key"},
	// --audience is a token's aud claim elsewhere; here it is agent|gateway|knowledge.
	"configpub fetch":    {"audience": "config-audience"},
	"configpub validate": {"audience": "config-audience"},
}

// shorthands are the one-letter forms of canonical names.
var shorthands = map[string]string{"output": "o"}

// applyVocabulary renames, on c and every verb under it, each flag defined
// under an old name.
func applyVocabulary(c *cobra.Command) {
	f := c.Flags()
	var olds []string
	f.VisitAll(func(fl *pflag.Flag) {
		if _, ok := canonicalName(c, fl.Name); ok && c.LocalNonPersistentFlags().Lookup(fl.Name) != nil {
			olds = append(olds, fl.Name)
		}
	})
	sort.Strings(olds)
	for _, old := range olds {
		canon, _ := canonicalName(c, old)
		aliasFlag(c, old, canon)
	}
	for _, sub := range c.Commands() {
		applyVocabulary(sub)
	}
}

func canonicalName(c *cobra.Command, name string) (string, bool) {
	if n, ok := verbRenames[c.CommandPath()][name]; ok {
		return n, true
	}
	n, ok := renames[name]
	return n, ok
}

// aliasFlag moves the flag old to the name canonical: the canonical flag
// shares old's value, usage, default and required mark; old stays as a
// hidden, deprecated alias that sets the same value.
func aliasFlag(c *cobra.Command, old, canonical string) {
	f := c.Flags()
	of := f.Lookup(old)
	if of == nil || f.Lookup(canonical) != nil {
		return
	}
	short := shorthands[canonical]
	if short != "" && f.ShorthandLookup(short) != nil {
		short = ""
	}
	nf := f.VarPF(of.Value, canonical, short, of.Usage)
	nf.DefValue, nf.NoOptDefVal, nf.Annotations = of.DefValue, of.NoOptDefVal, of.Annotations
	of.Annotations = nil
	of.Value = &aliasValue{Value: of.Value, target: nf}
	of.Hidden = true
	of.Deprecated = "use --" + canonical + " instead (--" + old + " will be removed in the next release)"
}

// aliasValue sets the canonical flag's value and marks it set, so required
// flags and "was it given" checks see the old name as the new one.
type aliasValue struct {
	pflag.Value
	target *pflag.Flag
}

func (a *aliasValue) Set(s string) error {
	if err := a.Value.Set(s); err != nil {
		return err
	}
	a.target.Changed = true
	return nil
}

// addGlobalFlags adds -v/--verbose and -q/--quiet to every verb. --quiet
// discards what a verb prints on success (errors still go to stderr);
// --verbose asks verbs that log their steps to log them on stderr.
func addGlobalFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.BoolP("verbose", "v", false, "log each step to stderr (verbs that have steps)")
	pf.BoolP("quiet", "q", false, "print nothing on success (errors still go to stderr)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if q, _ := cmd.Flags().GetBool("quiet"); q {
			cmd.SetOut(io.Discard)
		}
		return checkOutput(cmd)
	}
}

// verbose reports whether -v/--verbose was given.
func verbose(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("verbose")
	return v
}

// outputFlag adds -o/--output text|json to a reporting verb; report writes
// what the verb's --output asks for. The value is checked before the verb
// runs (a verb that changes something must not do it and then refuse to
// print).
func outputFlag(cmd *cobra.Command) {
	cmd.Flags().StringP("output", "o", "text", "output format: text or json")
	_ = cmd.Flags().SetAnnotation("output", outputAnnotation, []string{"text", "json"})
}

// jsonOutputFlag adds -o/--output json to a verb whose output is always
// JSON (one document or one line per event): a script passing -o json to
// every verb gets what it asked for, and -o text is refused.
func jsonOutputFlag(cmd *cobra.Command, what string) {
	cmd.Flags().StringP("output", "o", "json", "output format: json ("+what+"; the only format)")
	_ = cmd.Flags().SetAnnotation("output", outputAnnotation, []string{"json"})
}

const outputAnnotation = "configpub-output-formats"

// checkOutput refuses an --output value the verb does not write.
func checkOutput(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("output")
	if f == nil || f.Annotations[outputAnnotation] == nil {
		return nil
	}
	for _, ok := range f.Annotations[outputAnnotation] {
		if f.Value.String() == ok {
			return nil
		}
	}
	return usageError{fmt.Errorf("--output %q: want %s", f.Value.String(), strings.Join(f.Annotations[outputAnnotation], " or "))}
}

// report writes v as indented JSON with --output json, else text's output.
func report(cmd *cobra.Command, v any, text func(io.Writer) error) error {
	if o, _ := cmd.Flags().GetString("output"); o == "json" {
		return writeJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout())
}
