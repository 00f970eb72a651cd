package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/scaffold"
)

func addInitCmd(root *cobra.Command) {
	var env string
	cmd := &cobra.Command{
		Use:   "init [--env ENV] [DIR]",
		Short: "Write a minimal policy repository that compiles",
		Long: `init writes the smallest policy repository that compiles into DIR (default
the current directory): configpub.yaml (Repository), an Environment, a Host, an
Agent with the ModelAlias and Gateway it needs, and a Target for it. Every file
starts with a yaml-language-server line pointing at a self-contained copy of its
JSON Schema in .configpub/schemas/, so editors complete fields and show their
descriptions. A .gitattributes (* text=auto eol=lf) keeps LF line endings in
every checkout, for other tools: configpub itself reads a file checked out with
CRLF (core.autocrlf) as its LF bytes. DIR must be new or empty (a .git
directory alone is allowed).
docs/authoring.md describes every kind.`,
		Example: `  configpub init my-policy
  configpub init --env staging .
  cd my-policy && git init -b main && git add -A && git commit -m "policy: initial repository" && configpub compile --repo . --env dev`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			res, err := scaffold.Init(cmd.Context(), dir, scaffold.Options{EnvTag: env})
			if errors.Is(err, scaffold.ErrBadEnvTag) {
				return usageError{fmt.Errorf("--env: %w", err)}
			}
			if err != nil {
				return err
			}
			if env == "" {
				env = "dev"
			}
			rep := initReport{Dir: res.Dir, EnvTag: env, Files: res.Files}
			return report(cmd, rep, func(w io.Writer) error {
				fmt.Fprintf(w, "wrote a policy repository in %s:\n", res.Dir)
				for _, f := range res.Files {
					fmt.Fprintf(w, "  %s\n", f)
				}
				_, err := fmt.Fprintf(w, "next, in %s:\n  git init -b main && git add -A && git commit -m \"policy: initial repository\"\n  configpub compile --repo . --env %s   # writes releases/%s.yaml; commit it with the sources\n  configpub plan --repo . --env %s\n", res.Dir, env, env, env)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&env, "env", "dev", "environment of the first Target")
	outputFlag(cmd)
	root.AddCommand(cmd)
}

// initReport is what init prints with --output json.
type initReport struct {
	Dir    string   `json:"dir"`
	EnvTag string   `json:"envTag"`
	Files  []string `json:"files"` // slash-separated, relative to dir, sorted
}
