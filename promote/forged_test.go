package promote_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/forgery"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promote"
)

// mergeReviewed lands files on main from a branch off from, with a
// Reviewed-by trailer, and returns the merge commit.
func mergeReviewed(h *promotertest.Harness, branch string, from plumbing.Hash, files map[string][]byte) plumbing.Hash {
	h.Repo.Git.Commit(gittest.Commit{Branch: branch, From: from, Files: files, Message: branch})
	return h.Repo.Git.Merge(gittest.Main, branch, gittest.Commit{Message: "Merge " + branch, Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
}

// TestPromoteRefusesForgedManifest: every case of the forgery table —
// committed, reviewed and merged with its digests fixed to match — is
// refused as STALE at promote (the previous release comes from the store),
// with no registry request and no database row written.
func TestPromoteRefusesForgedManifest(t *testing.T) {
	h := promotertest.New(t)
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	// Release 2 changes the account agent only, so other targets carry over.
	files := h.Repo.Git.Files(h.Repo.R1)
	files["agents/account.yaml"] = bytes.Replace(files["agents/account.yaml"], []byte("requestsPerMinute: 120"), []byte("requestsPerMinute: 150"), 1)
	v2, res2 := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(2*3600e9))
	if forgery.Unchanged(res2.Manifest) < 0 {
		t.Fatal("release 2 carries no target over")
	}
	manifests := map[int64][]byte{1: promotertest.CommittedRelease(t, h.Repo.Git.Files(h.Repo.R1)), 2: promotertest.CommittedRelease(t, v2)}
	sources := map[int64]map[string][]byte{1: nil, 2: {"agents/account.yaml": v2["agents/account.yaml"]}}

	before := promotertest.ReadState(t, h.Pool)
	for i, c := range forgery.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			forged, err := forgery.Forge(c, manifests[c.Release])
			if err != nil {
				t.Fatal(err)
			}
			overlay := map[string][]byte{}
			promotertest.SetRelease(t, overlay, forged)
			for p, b := range sources[c.Release] {
				overlay[p] = b
			}
			commit := mergeReviewed(h, fmt.Sprintf("forged-%d", i), h.Repo.R1, overlay)
			h.Registry.Reset()
			_, err = h.Promote(t, h.Options(commit))
			var se *promote.StaleManifestError
			if !errors.As(err, &se) || !errors.Is(err, compiler.ErrStale) {
				t.Fatalf("got %v, want a *StaleManifestError", err)
			}
			if n := h.Registry.Total(); n != 0 {
				t.Errorf("got %d registry requests, want 0", n)
			}
			if after := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(before.Counts, after.Counts) || !promotertest.PointersAt(after.Pointers, h.Repo.Snapshots[h.Repo.R1]) {
				t.Errorf("got rows %v pointers %v, want unchanged at release 1", after.Counts, after.Pointers)
			}
		})
	}
	// The genuine release 2 promotes.
	goodFiles := map[string][]byte{"agents/account.yaml": v2["agents/account.yaml"]}
	promotertest.SetRelease(t, goodFiles, promotertest.CommittedRelease(t, v2))
	good := mergeReviewed(h, "release-2-good", h.Repo.R1, goodFiles)
	if _, err := h.Promote(t, h.Options(good)); err != nil {
		t.Fatalf("genuine release 2: %v", err)
	}
}

// cutWorkflowVersion removes the "- version: v" item (up to the next
// version) from a workflow file and returns the file and the item.
func cutWorkflowVersion(t *testing.T, b []byte, version, next string) ([]byte, string) {
	t.Helper()
	s := string(b)
	start := strings.Index(s, "    - version: "+version+"\n")
	end := strings.Index(s, "    - version: "+next+"\n")
	if start < 0 || end < start {
		t.Fatalf("no version %s before %s", version, next)
	}
	return []byte(s[:start] + s[end:]), s[start:end]
}

// TestPromoteRefusesChangedPublishedWorkflow: release 2 deletes the
// PUBLISHED account-onboarding@1.0.0 and is promoted; release 3 re-adds it
// with other content, its manifest compiled against a base whose ledger was
// stripped (compile itself refuses the change). Promote recompiles against
// release 2 as recorded in the store and refuses, writing nothing; re-adding
// it unchanged promotes.
func TestPromoteRefusesChangedPublishedWorkflow(t *testing.T) {
	h := promotertest.New(t)
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	mpath := compiler.ManifestPath(promotertest.Env)
	wf, tool := "workflows/account-onboarding.yaml", "tools/open-account.yaml"
	files := h.Repo.Git.Files(h.Repo.R1)
	files[wf] = bytes.Replace(files[wf], []byte("    - version: 1.1.0\n      state: DRAFT"), []byte("    - version: 1.1.0\n      state: PUBLISHED"), 1)
	var old string
	files[wf], old = cutWorkflowVersion(t, files[wf], "1.0.0", "1.1.0")
	files[tool] = bytes.Replace(files[tool], []byte("version: 1.0.0"), []byte("version: 1.1.0"), 1)
	v2, res2 := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(2*3600e9))
	if res2.Manifest.ReleaseVersion != 2 {
		t.Fatalf("got release %d, want 2", res2.Manifest.ReleaseVersion)
	}
	r2 := mergeReviewed(h, "release-2", h.Repo.R1, v2)
	if _, err := h.Promote(t, h.Options(r2)); err != nil {
		t.Fatalf("release 2: %v", err)
	}

	// Release 3 re-adds 1.0.0 with another cost ceiling. A forger strips
	// the ledger entry from a copy of release 2 to compile it at all.
	changed := strings.Replace(old, "costCeiling: 2.5", "costCeiling: 3.5", 1)
	readd := func(item string) map[string][]byte {
		f := map[string][]byte{}
		for p, b := range v2 {
			f[p] = b
		}
		f[wf] = bytes.Replace(v2[wf], []byte("    - version: 1.1.0\n"), []byte(item+"    - version: 1.1.0\n"), 1)
		return f
	}
	bad := readd(changed)
	if _, err := compiler.Compile(t.Context(), promotertest.MapFS(bad), compiler.Options{EnvTag: promotertest.Env, CreatedAt: gittest.Epoch.Add(3 * 3600e9)}); err == nil || !strings.Contains(err.Error(), "was PUBLISHED in release 1") {
		t.Fatalf("compile of the changed re-add: got %v, want the ledger refusal", err)
	}
	m2, err := bundle.ParseManifest(mpath, promotertest.CommittedRelease(t, v2))
	if err != nil {
		t.Fatal(err)
	}
	var kept []bundle.LedgerEntry
	for _, e := range m2.WorkflowLedger {
		if !strings.HasSuffix(e.Key(), "@1.0.0") || !strings.HasPrefix(e.Key(), "3f0c9a52") {
			kept = append(kept, e)
		}
	}
	m2.WorkflowLedger = kept
	stripped, err := m2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	promotertest.SetRelease(t, bad, stripped)
	v3bad, res3 := promotertest.CompiledFiles(t, bad, gittest.Epoch.Add(3*3600e9))
	if res3.Manifest.ReleaseVersion != 3 {
		t.Fatalf("forged compile gave release %d, want 3", res3.Manifest.ReleaseVersion)
	}
	r3bad := mergeReviewed(h, "release-3-changed", r2, v3bad)
	before := promotertest.ReadState(t, h.Pool)
	h.Registry.Reset()
	_, err = h.Promote(t, h.Options(r3bad))
	var se *compiler.SourceError
	if !errors.As(err, &se) || se.File != wf || !strings.Contains(err.Error(), "3f0c9a52-7d1e-4b8a-9c61-2f5e8d4b7a10@1.0.0") {
		t.Fatalf("promote of the changed re-add: got %v, want the ledger refusal at %s", err, wf)
	}
	if n := h.Registry.Total(); n != 0 {
		t.Errorf("got %d registry requests, want 0", n)
	}
	if after := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(before.Counts, after.Counts) || after.Current != 2 {
		t.Errorf("got rows %v current %d, want unchanged at release 2", after.Counts, after.Current)
	}

	// Identical content is accepted (compiled on the real release 2).
	v3, res3 := promotertest.CompiledFiles(t, readd(old), gittest.Epoch.Add(4*3600e9))
	if res3.Manifest.ReleaseVersion != 3 {
		t.Fatalf("got release %d, want 3", res3.Manifest.ReleaseVersion)
	}
	r3 := mergeReviewed(h, "release-3-same", r2, v3)
	if _, err := h.Promote(t, h.Options(r3)); err != nil {
		t.Fatalf("promote of the identical re-add: %v", err)
	}
}
