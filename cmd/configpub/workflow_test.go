package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkflowDiffCLI(t *testing.T) {
	golden, err := os.ReadFile("../../compiler/testdata/workflow-diff/account-onboarding-1.0.0-1.1.0.txt")
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("workflow", "diff", "3f0c9a52-7d1e-4b8a-9c61-2f5e8d4b7a10", "1.0.0", "1.1.0", "--repo", "../../fixtures/policy-repo")
	if err != nil || out != string(golden) {
		t.Fatalf("workflow diff: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"workflow", "diff", "account-onboarding", "1.0.0", "--repo", "../../fixtures/policy-repo"}, exitUsage},
		{[]string{"workflow", "diff", "account-onboarding", "1.0.0", "1.1.0"}, exitUsage},
		{[]string{"workflow", "diff", "account-onboarding", "1.0.0", "7.0.0", "--repo", "../../fixtures/policy-repo"}, 1},
	} {
		if _, err := runCLI(tc.args...); exitCode(err) != tc.code {
			t.Errorf("%v: exit %d (%v), want %d", tc.args, exitCode(err), err, tc.code)
		}
	}
}

// TestPlanShowsAddedWorkflowVersion: a change that adds a workflow version
// prints it side by side with the version before it.
func TestPlanShowsAddedWorkflowVersion(t *testing.T) {
	dir := gitFixture(t)
	p := filepath.Join(dir, "workflows", "account-onboarding.yaml")
	b, _ := os.ReadFile(p)
	src := string(b)
	added := strings.Replace(src[strings.Index(src, "    - version: 1.1.0"):], "version: 1.1.0", "version: 1.2.0", 1)
	if err := os.WriteFile(p, []byte(src+strings.Replace(added, "timeout: 45m", "timeout: 40m", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("plan", "--repo", dir, "--env", "dev")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	i := strings.Index(out, "new workflow version account-onboarding@1.2.0:")
	if i < 0 {
		t.Fatalf("plan does not show the added version:\n%s", out)
	}
	var changed []string
	for _, l := range strings.Split(out[i:], "\n") {
		if strings.Contains(l, " | ") {
			changed = append(changed, strings.Join(strings.Fields(l), " "))
		}
	}
	if got := strings.Join(changed, "; "); got != `timeout: "45m" | timeout: "40m"; version: "1.1.0" | version: "1.2.0"` {
		t.Fatalf("changed rows %q in\n%s", got, out[i:])
	}
}
