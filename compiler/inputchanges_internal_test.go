package compiler

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckKeepsOnlyTheChangedHostsInputs: a check keeps each host's own
// inputs, to name those that changed, only for the hosts whose inputs
// digest is not the committed release's — not every input of a large
// environment while its release is up to date.
func TestCheckKeepsOnlyTheChangedHostsInputs(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../fixtures/policy-repo")); err != nil {
		t.Fatal(err)
	}
	check := func() *Result {
		t.Helper()
		res, err := Compile(context.Background(), os.DirFS(dir), Options{EnvTag: "dev", CheckOnly: true, CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := check(); res.Stale() != nil || len(res.ownInputs) != 0 {
		t.Fatalf("up to date: stale %v, kept the inputs of %d hosts, want none", res.Stale(), len(res.ownInputs))
	}
	p := filepath.Join(dir, "agents", "account.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, "# reviewed\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := check(); res.Stale() == nil || len(res.ownInputs["dev.lightapi.net"]) == 0 {
		t.Fatalf("an Agent edited: stale %v, kept %v, want the inputs of dev.lightapi.net", res.Stale(), res.ownInputs)
	}
}
