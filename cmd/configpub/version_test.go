package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestReleaseBuild runs the release build (scripts/release.sh, what `make
// release` runs) for this machine's platform and checks that the binary's
// --version and version verb print the version and commit, and that
// SHA256SUMS holds the binary's digest. TRIMPATH and CGO_ENABLED are set
// as this test's own build has them, so the build reuses the build cache
// (a -trimpath or cgo-less build recompiles every dependency); everything
// else is the release build.
func TestReleaseBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	// A binary an earlier run built into the same directory (the release
	// workflow's `make image` after `make release`) stays listed.
	earlier := []byte("an earlier run's binary\n")
	if err := os.WriteFile(filepath.Join(dir, "configpub_aix_ppc64"), earlier, 0o755); err != nil {
		t.Fatal(err)
	}
	const commitID = "4f2c0d9e8b7a6f5e4d3c2b1a09f8e7d6c5b4a392"
	build := exec.Command("sh", "../../scripts/release.sh", dir)
	build.Env = append(os.Environ(), "VERSION=v9.8.7", "COMMIT="+commitID, "TARGETS="+runtime.GOOS+"/"+runtime.GOARCH, "TRIMPATH=", "CGO_ENABLED="+cgoEnabled(t))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("release build: %v\n%s", err, out)
	}
	name := "configpub_" + runtime.GOOS + "_" + runtime.GOARCH
	bin := filepath.Join(dir, name)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%x  %s\n%x  %s\n", sha256.Sum256(earlier), "configpub_aix_ppc64", sha256.Sum256(b), name); string(sums) != want {
		t.Errorf("SHA256SUMS = %q, want %q", sums, want)
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

func cgoEnabled(t *testing.T) string {
	out, err := exec.Command("go", "env", "CGO_ENABLED").Output()
	if err != nil {
		t.Fatalf("go env CGO_ENABLED: %v", err)
	}
	return strings.TrimSpace(string(out))
}
