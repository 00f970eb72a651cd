package main

import (
	"github.com/spf13/cobra"
)

// newRootCmd assembles the CLI. Each verb lives in its own file and is added
// here; a verb only parses flags into a library Options value, makes one
// library call and prints the result through cmd.OutOrStdout().
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "configpub",
		Short:         "Publish immutable, per-audience runtime policy from Git to workloads",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       currentVersion().String(),
	}
	root.SetVersionTemplate("configpub {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, add := range verbs {
		add(root)
	}
	applyVocabulary(root)
	addGlobalFlags(root)
	withHints(root)
	markRan(root)
	organizeHelp(root)
	// --version without the -v shorthand cobra would add: -v stays free.
	root.Flags().Bool("version", false, "print the version and the commit the binary was built from")
	return root
}

// verbs lists the functions that add subcommands; each verb file appends to
// it from an init-free registration below, in a fixed order.
var verbs = []func(*cobra.Command){
	addVersionCmd,
	addDemoCmd,
	addInitCmd,
	addCompileCmd,
	addPlanCmd,
	addValidateCmd,
	addKeygenCmd,
	addPullCmd,
	addVerifyOCICmd,
	addRegistryCmd,
	addPublishCmd,
	addServeCmd,
	addConsoleCmd,
	addTokenCmd,
	addPromoteCmd,
	addFetchCmd,
	addDBCmd,
	addRollbackCmd,
	addActivateCmd,
	addGateCmd,
	addWebhookCmd,
	addRevokeCmd,
	addReconcileCmd,
	addStatusCmd,
	addHistoryCmd,
	addReadbackCmd,
	addLeaseCmd,
	addWorkflowCmd,
}
