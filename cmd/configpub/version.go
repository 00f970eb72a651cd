package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are set at build time:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.commit=$(git rev-parse HEAD)" ./cmd/configpub
//
// When they are not, the build information Go records in the binary is used
// (the module version for `go install …@version`, the VCS revision for a build
// inside a Git checkout).
var (
	version = ""
	commit  = ""
)

// buildVersion is what --version prints.
type buildVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Modified  bool   `json:"modified"`
	// MemoryLimit is the Go runtime's soft memory limit in bytes (from
	// GOMEMLIMIT or the container's memory limit), omitted when none.
	MemoryLimit int64 `json:"memoryLimit,omitempty"`
}

func (v buildVersion) String() string {
	c := v.Commit
	if c == "" {
		c = "unknown"
	}
	if v.Modified {
		c += "+modified"
	}
	return fmt.Sprintf("%s (commit %s, %s)", v.Version, c, v.GoVersion)
}

func currentVersion() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return resolveVersion(version, commit, bi)
}

// resolveVersion prefers the linker-set values and falls back to bi.
func resolveVersion(ldVersion, ldCommit string, bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: ldVersion, Commit: ldCommit}
	if bi != nil {
		v.GoVersion = bi.GoVersion
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		if v.Commit == "" {
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					v.Commit = s.Value
				case "vcs.modified":
					v.Modified = s.Value == "true"
				}
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	if v.GoVersion == "" {
		v.GoVersion = "go unknown"
	}
	return v
}

func addVersionCmd(root *cobra.Command) {
	cmd := &cobra.Command{
		Use:     "version",
		Short:   "Print the configpub version and the commit it was built from",
		Example: "  configpub version\n  configpub --version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := currentVersion()
			v.MemoryLimit = memoryLimit()
			return report(cmd, v, func(w io.Writer) error { _, err := fmt.Fprintf(w, "configpub %s\n", v); return err })
		},
	}
	outputFlag(cmd)
	root.AddCommand(cmd)
}
