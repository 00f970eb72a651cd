package compiler_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
)

const onboardingID = "3f0c9a52-7d1e-4b8a-9c61-2f5e8d4b7a10"

// cutVersion removes the "- version: v" item from a workflow file and
// returns it, so a test can add it back later.
func cutVersion(t *testing.T, path, version, next string) string {
	t.Helper()
	b := readFile(t, path)
	start := strings.Index(b, "    - version: "+version+"\n")
	end := strings.Index(b, "    - version: "+next+"\n")
	if start < 0 || end < start {
		t.Fatalf("%s: no version %s before %s", path, version, next)
	}
	writeFile(t, path, b[:start]+b[end:])
	return b[start:end]
}

func ledgerEntry(m *bundle.Manifest, key string) *bundle.LedgerEntry {
	for i := range m.WorkflowLedger {
		if m.WorkflowLedger[i].Key() == key {
			return &m.WorkflowLedger[i]
		}
	}
	return nil
}

// TestWorkflowLedger deletes a PUBLISHED workflow version in release 2 and
// re-adds it in release 3: with other content it is refused naming the
// version, both digests and file:line; with identical content it is
// accepted. The ledger keeps the deleted version in between.
func TestWorkflowLedger(t *testing.T) {
	dir := copyRepo(t)
	h := newHistory(t, dir)
	r1 := h.compile(t, time.Time{})
	v1 := ledgerEntry(r1.Manifest, onboardingID+"@1.0.0")
	if v1 == nil || v1.PublishedIn != 1 {
		t.Fatalf("release 1 ledger lacks %s@1.0.0: %+v", onboardingID, r1.Manifest.WorkflowLedger)
	}
	if ledgerEntry(r1.Manifest, onboardingID+"@1.1.0") != nil {
		t.Fatalf("release 1 ledger lists the DRAFT 1.1.0")
	}

	// Release 2: publish 1.1.0, bind the tool to it, delete 1.0.0.
	wf := filepath.Join(dir, "workflows/account-onboarding.yaml")
	edit(t, wf, "    - version: 1.1.0\n      state: DRAFT", "    - version: 1.1.0\n      state: PUBLISHED")
	old := cutVersion(t, wf, "1.0.0", "1.1.0")
	edit(t, filepath.Join(dir, "tools/open-account.yaml"), "version: 1.0.0", "version: 1.1.0")
	r2 := h.release(t, time.Date(2026, 8, 20, 0, 0, 0, 0, time.UTC))
	if got := ledgerEntry(r2.Manifest, onboardingID+"@1.0.0"); got == nil || *got != *v1 {
		t.Fatalf("release 2 ledger entry for the deleted 1.0.0 = %+v, want %+v carried forward", got, v1)
	}
	if got := ledgerEntry(r2.Manifest, onboardingID+"@1.1.0"); got == nil || got.PublishedIn != 2 {
		t.Fatalf("release 2 ledger entry for 1.1.0 = %+v, want published in 2", got)
	}
	for _, w := range r2.Manifest.Workflows {
		if w.WfDefID == onboardingID && w.Version == "1.0.0" {
			t.Fatalf("release 2 still lists the deleted version in workflows")
		}
	}

	// Release 3, attempt 1: 1.0.0 comes back with other content.
	changed := strings.Replace(old, "costCeiling: 2.5", "costCeiling: 3.5", 1)
	if changed == old {
		t.Fatal("fixture version 1.0.0 has no costCeiling: 2.5")
	}
	b := readFile(t, wf)
	writeFile(t, wf, strings.Replace(b, "    - version: 1.1.0\n", changed+"    - version: 1.1.0\n", 1))
	_, err := h.try(time.Date(2026, 8, 21, 0, 0, 0, 0, time.UTC))
	var se *compiler.SourceError
	if !errors.As(err, &se) {
		t.Fatalf("re-adding a changed PUBLISHED version: got %v, want a *compiler.SourceError", err)
	}
	msg := err.Error()
	for _, want := range []string{"workflows/account-onboarding.yaml:9:", onboardingID + "@1.0.0", v1.Digest, "was PUBLISHED in release 1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Count(msg, "sha256:") != 2 {
		t.Errorf("error %q does not name both digests", msg)
	}

	// Attempt 2: identical content is accepted.
	writeFile(t, wf, strings.Replace(b, "    - version: 1.1.0\n", old+"    - version: 1.1.0\n", 1))
	r3 := h.release(t, time.Date(2026, 8, 21, 0, 0, 0, 0, time.UTC))
	if got := ledgerEntry(r3.Manifest, onboardingID+"@1.0.0"); got == nil || *got != *v1 {
		t.Fatalf("release 3 ledger entry = %+v, want %+v", got, v1)
	}
	// A published version cannot return to DRAFT either.
	edit(t, wf, "    - version: 1.0.0\n      state: PUBLISHED", "    - version: 1.0.0\n      state: DRAFT")
	if _, err := h.try(time.Date(2026, 8, 22, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "cannot return to DRAFT") {
		t.Fatalf("PUBLISHED -> DRAFT: got %v", err)
	}
}

// TestOnePublicationPerRelease: every snapshot release N creates carries
// the same publicationId; carried-over snapshots keep their release's.
func TestOnePublicationPerRelease(t *testing.T) {
	dir := copyRepo(t)
	h := newHistory(t, dir)
	r1 := h.compile(t, time.Time{})
	p1 := bundle.PublicationID("dev", 1)
	for _, tg := range r1.Targets {
		if tg.PublicationID != p1 || tg.Envelope.PublicationID != p1 {
			t.Errorf("release 1 %s: publicationId %s, want %s", tg.ServiceID, tg.PublicationID, p1)
		}
	}
	edit(t, filepath.Join(dir, "agents/account.yaml"), "requestsPerMinute: 120", "requestsPerMinute: 150")
	r2 := h.release(t, time.Date(2026, 8, 20, 0, 0, 0, 0, time.UTC))
	p2 := bundle.PublicationID("dev", 2)
	if p2 == p1 {
		t.Fatal("releases 1 and 2 share a publicationId")
	}
	created := 0
	for _, tg := range r2.Targets {
		want := p1
		if tg.Changed {
			want = p2
			created++
		}
		if tg.PublicationID != want {
			t.Errorf("release 2 %s (changed %v): publicationId %s, want %s", tg.ServiceID, tg.Changed, tg.PublicationID, want)
		}
	}
	if created < 2 {
		t.Fatalf("release 2 created %d snapshots, want the account agent and its receivers", created)
	}
	// The Gateway accepts the account agent's new and replaced pairs.
	gw := string(target(r2, "com.networknt.light-gateway-1.0.0").Values)
	acc := target(r2, "com.networknt.agent-account-1.0.0")
	for _, want := range []string{"publicationId: \"" + p1 + "\"", "publicationId: \"" + p2 + "\"", acc.PolicyDigest} {
		if !strings.Contains(gw, want) {
			t.Errorf("gateway accepted publications lack %s", want)
		}
	}
}
