package main

import (
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/demo"
)

func addDemoCmd(root *cobra.Command) {
	var opts demo.Options
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole pipeline end to end on embedded defaults, narrating each step",
		Long: `demo starts a private PostgreSQL cluster, the embedded OCI registry and the Config
Server, creates a Git policy repository from the embedded fixtures, then compiles,
publishes, promotes, serves and fetches two releases, rolls back, shows a tampered
response being rejected, and prints the publication timeline and the operator
console's URL; with --keep everything stays up until Ctrl-C. It needs PostgreSQL's
server binaries (initdb, pg_ctl). It can be run again; it stops everything it started
on exit or Ctrl-C.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			return demo.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Dir, "dir", ".configpub/demo", "state directory (wiped at the start of every run)")
	cmd.Flags().StringVar(&opts.EnvTag, "env", "dev", "environment to promote")
	cmd.Flags().BoolVar(&opts.Keep, "keep", false, "keep PostgreSQL, the registry, the Config Server and the operator console running until Ctrl-C")
	root.AddCommand(cmd)
}
