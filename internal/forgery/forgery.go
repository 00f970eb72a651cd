// Package forgery is the table of hand-edited release manifests the
// compile check and the promoter must both refuse as stale. Each case edits
// one field (or one consistent group of fields) of a parsed manifest; the
// caller re-marshals it, which recomputes releaseDigest, so only the edited
// content is wrong — as a forger who "fixes the digests" would leave it.
package forgery

import (
	"fmt"

	"github.com/configpub/configpub/bundle"
)

// Case is one forgery.
type Case struct {
	Name string
	// Release is the committed release the case forges: 1 (the first
	// release) or 2 (a release that carries targets over from release 1).
	Release int64
	// Edit changes m in place; target is the index of a target release 2
	// carried over unchanged from release 1 (for Release 2 cases).
	Edit func(m *bundle.Manifest, target int)
}

// Unchanged returns the index of the first target of m that m did not
// change, or -1.
func Unchanged(m *bundle.Manifest) int {
	for i := range m.Targets {
		if !m.Targets[i].Changed {
			return i
		}
	}
	return -1
}

// Forge applies c to a copy of the manifest in b and returns the
// re-marshalled bytes (releaseDigest recomputed).
func Forge(c Case, b []byte) ([]byte, error) {
	m, err := bundle.ParseManifest("forged", b)
	if err != nil {
		return nil, err
	}
	i := Unchanged(m)
	if c.Release == 2 && i < 0 {
		return nil, fmt.Errorf("release %d carries no target over", m.ReleaseVersion)
	}
	c.Edit(m, i)
	return m.Marshal()
}

const century = "2126-08-13T14:00:00Z"

// Cases returns every forgery.
func Cases() []Case {
	t := func(name string, edit func(e *bundle.TargetEntry, m *bundle.Manifest)) Case {
		return Case{Name: "unchanged target " + name, Release: 2, Edit: func(m *bundle.Manifest, i int) { edit(&m.Targets[i], m) }}
	}
	r := func(release int64, name string, edit func(m *bundle.Manifest)) Case {
		return Case{Name: name, Release: release, Edit: func(m *bundle.Manifest, _ int) { edit(m) }}
	}
	return []Case{
		t("expiresAt a century away", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.ExpiresAt = century }),
		t("refreshAfter later", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.RefreshAfter = e.ExpiresAt }),
		t("validFrom earlier", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.ValidFrom = "2000-01-01T00:00:00Z" }),
		t("createdAt earlier", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.CreatedAt = "2026-08-01T00:00:00Z" }),
		t("whole window moved consistently", func(e *bundle.TargetEntry, _ *bundle.Manifest) {
			// A window consistent with the lease profile, but not the one
			// release 1 recorded.
			e.CreatedAt, e.ValidFrom = "2026-08-13T13:00:00Z", "2026-08-13T13:00:00Z"
			e.RefreshAfter = shift(e.RefreshAfter)
			e.ExpiresAt = shift(e.ExpiresAt)
		}),
		t("publicationId of this release", func(e *bundle.TargetEntry, m *bundle.Manifest) {
			e.PublicationID = bundle.PublicationID(m.EnvTag, m.ReleaseVersion)
		}),
		t("publicationId arbitrary", func(e *bundle.TargetEntry, _ *bundle.Manifest) {
			e.PublicationID = "00000000-0000-8000-8000-000000000000"
		}),
		t("claims to be new in this release", func(e *bundle.TargetEntry, m *bundle.Manifest) {
			e.ReleaseVersion, e.SourceEventSequence, e.Changed = m.ReleaseVersion, m.ReleaseVersion, true
			e.PublicationID = bundle.PublicationID(m.EnvTag, m.ReleaseVersion)
		}),
		t("releaseVersion 0", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.ReleaseVersion = 0 }),
		t("policyVersion", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.PolicyVersion++ }),
		t("sourceEventSequence", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.SourceEventSequence++ }),
		t("snapshotId", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.SnapshotID = "00000000-0000-8000-8000-000000000001" }),
		t("policySnapshotId", func(e *bundle.TargetEntry, _ *bundle.Manifest) {
			e.PolicySnapshotID = "00000000-0000-8000-8000-000000000002"
		}),
		t("revocationEpoch", func(e *bundle.TargetEntry, m *bundle.Manifest) { e.RevocationEpoch = m.RevocationEpoch + 1 }),
		t("compatibilityGeneration", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.CompatibilityGeneration++ }),
		t("delivery lease", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.DeliveryLease.ExpiresAfter = "87600h" }),
		t("artifactDigest", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.ArtifactDigest = digest('a') }),
		t("policyDigest", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.PolicyDigest = digest('b') }),
		t("previous publication", func(e *bundle.TargetEntry, m *bundle.Manifest) {
			e.Previous = &bundle.Publication{PublicationID: bundle.PublicationID(m.EnvTag, 1), PolicyDigest: digest('c')}
		}),
		t("lease profile digest", func(e *bundle.TargetEntry, _ *bundle.Manifest) { e.LeaseProfileDigest = digest('d') }),
		r(2, "release createdAt before release 1", func(m *bundle.Manifest) { m.CreatedAt = "2026-08-01T00:00:00Z" }),
		r(2, "releaseVersion -5", func(m *bundle.Manifest) { m.ReleaseVersion, m.BaseReleaseVersion = -5, -6 }),
		r(2, "releaseVersion 0", func(m *bundle.Manifest) { m.ReleaseVersion, m.BaseReleaseVersion = 0, -1 }),
		r(2, "releaseVersion 2^53-1", func(m *bundle.Manifest) { renumber(m, 1<<53-1) }),
		r(2, "releaseVersion 3 on base 2", func(m *bundle.Manifest) { renumber(m, 3) }),
		r(1, "releaseVersion 2 on base 1", func(m *bundle.Manifest) { renumber(m, 2) }),
		r(2, "base 0", func(m *bundle.Manifest) { m.BaseReleaseVersion = 0 }),
		r(2, "sourceEventSequence", func(m *bundle.Manifest) { m.SourceEventSequence = 7 }),
		r(2, "revocationEpoch", func(m *bundle.Manifest) { m.RevocationEpoch++ }),
		r(2, "ledger entry dropped", func(m *bundle.Manifest) { m.WorkflowLedger = m.WorkflowLedger[1:] }),
		r(2, "input digest", func(m *bundle.Manifest) { m.Inputs[0].Digest = digest('e') }),
		r(1, "base 7 on release 1", func(m *bundle.Manifest) { m.BaseReleaseVersion = 7 }),
		r(1, "releaseVersion -5 on release 1", func(m *bundle.Manifest) { m.ReleaseVersion, m.BaseReleaseVersion = -5, -6 }),
		r(1, "releaseVersion 0 on release 1", func(m *bundle.Manifest) { m.ReleaseVersion, m.BaseReleaseVersion = 0, -1 }),
		r(1, "expiresAt on release 1", func(m *bundle.Manifest) { m.Targets[0].ExpiresAt = century }),
		r(1, "ledger publishedIn", func(m *bundle.Manifest) { m.WorkflowLedger[0].PublishedIn = 0 }),
	}
}

// renumber makes m release v on base v-1, consistently: the snapshots m
// created become snapshots of release v.
func renumber(m *bundle.Manifest, v int64) {
	old := m.ReleaseVersion
	m.ReleaseVersion, m.BaseReleaseVersion, m.SourceEventSequence = v, v-1, v
	for i := range m.Targets {
		if t := &m.Targets[i]; t.ReleaseVersion == old {
			t.ReleaseVersion, t.SourceEventSequence, t.PublicationID = v, v, bundle.PublicationID(m.EnvTag, v)
		}
	}
	for i := range m.WorkflowLedger {
		if m.WorkflowLedger[i].PublishedIn == old {
			m.WorkflowLedger[i].PublishedIn = v
		}
	}
}

// shift moves a time one hour earlier.
func shift(s string) string {
	t, err := bundle.ParseTime(s)
	if err != nil {
		return s
	}
	return t.Add(-3600e9).Format(bundle.TimeFormat)
}

func digest(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return "sha256:" + string(b)
}
