package compiler_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

// TestRetiredTargetReAddedIsANewSnapshot: a Target removed in release 2
// (retired) and put back unchanged in release 3, months later, is compiled
// as a changed target of release 3 with a snapshot of its own, never
// release 1's again (its envelope names release 3).
func TestRetiredTargetReAddedIsANewSnapshot(t *testing.T) {
	const advisor = "com.networknt.agent-advisor-1.0.0"
	dir := copyRepo(t)
	h := newHistory(t, dir)
	a1 := *target(h.compile(t, time.Time{}), advisor)
	path := filepath.Join(dir, "targets/dev/advisor.yaml")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if r2 := h.release(t, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)); target(r2, advisor) != nil {
		t.Fatal("release 2 still holds the removed target")
	}
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	r3 := h.release(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	a3 := target(r3, advisor)
	if a3 == nil || !a3.Changed || a3.ReleaseVersion != 3 || a3.SnapshotID == a1.SnapshotID {
		t.Fatalf("re-added target: %+v, want a changed target of release 3 with a new snapshot (release 1's was %s)", a3, a1.SnapshotID)
	}
}

// TestEnvironmentWithoutTargetsIsRefused: an environment whose Target
// documents were all deleted compiled to a release with no targets, which
// promote refuses ("a release needs at least one target") and which,
// committed, would be the base of every later release. It is refused at
// compile, naming the environment, and nothing is written.
func TestEnvironmentWithoutTargetsIsRefused(t *testing.T) {
	dir := copyRepo(t)
	h := newHistory(t, dir)
	h.compile(t, time.Time{})
	before, err := os.ReadFile(filepath.Join(dir, compiler.ManifestPath("dev")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "targets/dev")); err != nil {
		t.Fatal(err)
	}
	_, err = h.try(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC))
	if !errors.Is(err, compiler.ErrInvalidSource) || !strings.Contains(err.Error(), `environment "dev" (environments/dev.yaml) has no Target document`) {
		t.Fatalf("compile of an environment without targets: %v, want it refused naming the environment", err)
	}
	after, err := os.ReadFile(filepath.Join(dir, compiler.ManifestPath("dev")))
	if err != nil || string(after) != string(before) {
		t.Fatalf("the committed release changed (%v)", err)
	}
}
