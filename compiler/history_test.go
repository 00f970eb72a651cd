package compiler_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
)

func target(res *compiler.Result, svc string) *compiler.Target {
	for i := range res.Targets {
		if res.Targets[i].ServiceID == svc {
			return &res.Targets[i]
		}
	}
	return nil
}

func entry(res *compiler.Result, svc string) *bundle.TargetEntry {
	t := target(res, svc)
	return res.Manifest.Target(t.Host, t.ServiceID)
}

// TestReleaseHistory walks three releases: the overlap window of accepted
// publications, tombstones in the Knowledge inventory, policyVersion
// increments, and carried-over snapshots.
func TestReleaseHistory(t *testing.T) {
	const (
		account = "com.networknt.agent-account-1.0.0"
		advisor = "com.networknt.agent-advisor-1.0.0"
		gateway = "com.networknt.light-gateway-1.0.0"
		know    = "com.networknt.knowledge-1.0.0"
	)
	dir := copyRepo(t)
	h := newHistory(t, dir)
	r1 := h.compile(t, time.Time{})
	oldPub := target(r1, account).PublicationID
	oldPolicy := target(r1, account).PolicyDigest

	// Release 2: the account agent changes.
	edit(t, filepath.Join(dir, "agents/account.yaml"), "requestsPerMinute: 120", "requestsPerMinute: 150")
	r2 := h.release(t, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC))
	acc := target(r2, account)
	if acc.PolicyVersion != 2 || acc.ReleaseVersion != 2 || !acc.Changed {
		t.Fatalf("account: policyVersion %d release %d changed %v, want 2 2 true", acc.PolicyVersion, acc.ReleaseVersion, acc.Changed)
	}
	if p := entry(r2, account).Previous; p == nil || p.PublicationID != oldPub || p.PolicyDigest != oldPolicy {
		t.Fatalf("account previous = %+v, want release 1's pair", p)
	}
	if adv := target(r2, advisor); adv.Changed || adv.PolicyVersion != 1 || adv.ReleaseVersion != 1 {
		t.Errorf("advisor changed = %v (policyVersion %d, release %d), want carried over", adv.Changed, adv.PolicyVersion, adv.ReleaseVersion)
	}
	gw := string(target(r2, gateway).Values)
	for _, want := range []string{oldPub, acc.PublicationID, oldPolicy, acc.PolicyDigest} {
		if !strings.Contains(gw, want) {
			t.Errorf("gateway artifact lacks accepted publication value %s", want)
		}
	}

	// Release 3: a knowledge base loses a retrieval profile; the account
	// agent is unchanged, so its overlap pair stays and gateway bytes stay.
	edit(t, filepath.Join(dir, "agents/advisor.yaml"), "retrievalProfile: deep", "retrievalProfile: default")
	edit(t, filepath.Join(dir, "knowledge/product-docs.yaml"), "    - name: deep\n      topK: 20\n      maxResultTokens: 6000\n      graphBehavior: neighbors\n      reranker: cross-encoder\n", "")
	r3 := h.release(t, time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC))
	if target(r3, account).Changed {
		t.Errorf("account changed in release 3")
	}
	e := entry(r3, know)
	var gone []string
	for _, ts := range e.Tombstones {
		gone = append(gone, ts.Kind+":"+ts.ID)
	}
	wantGone := map[string]bool{"retrievalProfile:product-docs/deep": true, "binding:advisor/product-docs/deep": true}
	for _, g := range gone {
		delete(wantGone, g)
	}
	if len(wantGone) != 0 {
		t.Errorf("tombstones %v lack %v", gone, wantGone)
	}
	if !strings.Contains(string(target(r3, know).Values), "tombstones:\n      - kind: \"binding\"") {
		t.Errorf("knowledge artifact does not list tombstones")
	}
	// Recompiling release 3 reproduces it exactly.
	again, err := h.try(time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.UpToDate {
		t.Fatalf("release 3 not reproduced: %v", again.Stale())
	}
}
