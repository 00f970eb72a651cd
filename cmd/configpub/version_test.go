package main

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromLdflags builds the binary the way a release build does and
// checks that --version and the version verb print the version and commit.
func TestVersionFromLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "configpub")
	const commitID = "4f2c0d9e8b7a6f5e4d3c2b1a09f8e7d6c5b4a392"
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.version=v9.8.7 -X main.commit="+commitID, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("configpub %v: %v\n%s", args, err, out)
		}
		want := "configpub v9.8.7 (commit " + commitID + ", go"
		if !strings.HasPrefix(string(out), want) {
			t.Errorf("configpub %v printed %q, want it to start with %q", args, out, want)
		}
	}
}

func TestResolveVersionFallsBackToBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"},
	}}
	tests := []struct {
		name                string
		ldVersion, ldCommit string
		bi                  *debug.BuildInfo
		want                string
	}{
		{"ldflags win", "v2.0.0", "def456", bi, "v2.0.0 (commit def456, go1.26.0)"},
		{"build info", "", "", bi, "v1.4.0 (commit abc123+modified, go1.26.0)"},
		{"devel build", "", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "devel (commit unknown, go1.26.0)"},
		{"no build info", "", "", nil, "devel (commit unknown, go unknown)"},
	}
	for _, tt := range tests {
		if got := resolveVersion(tt.ldVersion, tt.ldCommit, tt.bi).String(); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
