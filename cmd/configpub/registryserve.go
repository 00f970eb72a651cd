package main

import (
	"fmt"
	"net"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/registry/embedded"
)

func addRegistryCmd(root *cobra.Command) {
	parent := &cobra.Command{Use: "registry", Short: "The embedded OCI registry; delivery manifests as referrers; republishing a lost registry from the store"}
	var dir, addr, logLevel string
	serve := &cobra.Command{
		Use:   "serve --dir DIR [--listen 127.0.0.1:5000]",
		Short: "Serve the CNCF Distribution registry in-process (filesystem storage, plain HTTP) until interrupted",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lvl, err := logrus.ParseLevel(logLevel)
			if err != nil {
				return usageError{fmt.Errorf("--log-level: %w", err)}
			}
			// Distribution logs through logrus's standard logger; the CLI is
			// the one place that configures it.
			logrus.SetLevel(lvl)
			logrus.SetOutput(os.Stderr)
			reg, err := embedded.New(cmd.Context(), embedded.Options{Dir: dir})
			if err != nil {
				return err
			}
			defer reg.Close()
			out := cmd.OutOrStdout()
			return reg.Serve(cmd.Context(), addr, func(a net.Addr) {
				fmt.Fprintf(out, "serving OCI registry on http://%s (storage %s)\n", a, dir)
			})
		},
	}
	serve.Flags().StringVar(&dir, "dir", "", "storage directory (required)")
	serve.Flags().StringVar(&addr, "addr", "127.0.0.1:5000", "listen address")
	serve.Flags().StringVar(&logLevel, "log-level", "warn", "Distribution log level (error, warn, info, debug)")
	_ = serve.MarkFlagRequired("dir")
	parent.AddCommand(serve, newRegistryAttachCmd(), newRegistryRepublishCmd())
	root.AddCommand(parent)
}
