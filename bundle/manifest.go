package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// Release manifest identification.
const (
	ManifestAPIVersion = "configpub.dev/v1"
	ManifestKind       = "Release"
)

// Manifest is the release manifest of one environment, committed as
// releases/<envTag>.yaml next to the policy change it releases.
// It holds everything a recompile at the same commit needs to reproduce the
// release byte for byte. Field order is the order written.
type Manifest struct {
	ReleaseHeader
	// Inputs are the input files of the release that are not one host's
	// alone (the repository and environment documents always); the inputs
	// of one host are digested per host in HostInputs.
	Inputs []Input `json:"inputs"`
	// HostInputs is, per host of the sharded layout, the digest of the
	// inputs only that host's targets read (InputsDigest), sorted by host.
	HostInputs []HostInputs `json:"hostInputs,omitempty"`
	// LeaseProfiles are the lease profiles the targets name, so the
	// manifest can be checked on its own: every target's window is its
	// profile applied to its createdAt.
	LeaseProfiles []LeaseProfile    `json:"leaseProfiles"`
	Subjects      []Subject         `json:"subjects"`
	Workflows     []WorkflowVersion `json:"workflows"`
	// WorkflowLedger lists every workflow version ever PUBLISHED in the
	// environment, carried forward from release to release even after the
	// version is deleted from the sources: a published version's content
	// may never change.
	WorkflowLedger []LedgerEntry `json:"workflowLedger"`
	Targets        []TargetEntry `json:"targets"`
	// ReleaseDigest is the release digest (see Files).
	ReleaseDigest string `json:"releaseDigest,omitempty"`
	// SingleFile: the manifest was read from the single-file layout of
	// releases before shards (the next compile rewrites it sharded).
	SingleFile bool `json:"-"`
}

// ReleaseHeader is the release-wide part a release manifest states once,
// first, in this order: in the single file, and in the root file of the
// sharded layout.
type ReleaseHeader struct {
	APIVersion              string `json:"apiVersion"`
	Kind                    string `json:"kind"`
	EnvTag                  string `json:"envTag"`
	ReleaseVersion          int64  `json:"releaseVersion"`
	BaseReleaseVersion      int64  `json:"baseReleaseVersion"`
	CreatedAt               string `json:"createdAt"`
	SourceEventSequence     int64  `json:"sourceEventSequence"`
	CompatibilityGeneration int64  `json:"compatibilityGeneration"`
	RevocationEpoch         int64  `json:"revocationEpoch"`
	SchemaVersion           int    `json:"schemaVersion"`
	Renderer                string `json:"renderer"`
}

// LeaseProfile is a named lease profile as Go duration strings: the
// activation window (validFor, refreshAfter from createdAt) and the rolling
// delivery lease.
type LeaseProfile struct {
	Name         string `json:"name"`
	Digest       string `json:"digest"`
	ValidFor     string `json:"validFor"`
	RefreshAfter string `json:"refreshAfter"`
	Delivery     Lease  `json:"delivery"`
}

// ComputeDigest returns the profile's digest: "sha256:" over the RFC 8785
// bytes of {validFor, refreshAfter, delivery: {refreshAfter, expiresAfter}}.
func (p *LeaseProfile) ComputeDigest() (string, error) {
	return render.Digest(render.Map().
		Add("validFor", render.String(p.ValidFor)).
		Add("refreshAfter", render.String(p.RefreshAfter)).
		Add("delivery", render.Map().
			Add("refreshAfter", render.String(p.Delivery.RefreshAfter)).
			Add("expiresAfter", render.String(p.Delivery.ExpiresAfter))))
}

// Input is one source file the release was compiled from.
type Input struct {
	Path   string `json:"path"`
	Digest string `json:"digest"` // sha256 of the exact file bytes
}

// Subject is the frozen domain policy of one subject (compile step 2).
type Subject struct {
	Kind             string `json:"kind"`
	Name             string `json:"name"`
	PolicySnapshotID string `json:"policySnapshotId"`
	PolicyVersion    int64  `json:"policyVersion"`
	PolicyDigest     string `json:"policyDigest"`
	// Host is the host whose shard lists the subject: the one host all
	// its targets are on ("" when they are on several, or none: the root).
	Host string `json:"host,omitempty"`
}

// WorkflowVersion pins one workflow version's definition digest, so a
// PUBLISHED version can be proven unchanged against the base release.
type WorkflowVersion struct {
	Name    string `json:"name"`
	WfDefID string `json:"wfDefId"`
	Version string `json:"version"`
	State   string `json:"state"`
	Digest  string `json:"digest"`
	// Host is the workflow's host, whose shard lists the version ("" for
	// the root).
	Host string `json:"host,omitempty"`
}

// LedgerEntry is one PUBLISHED workflow version of the workflow ledger:
// its stable definition id, version, content digest and the release that
// first published it.
type LedgerEntry struct {
	WfDefID     string `json:"wfDefId"`
	Version     string `json:"version"`
	Digest      string `json:"digest"`
	PublishedIn int64  `json:"publishedIn"`
}

// Key returns "wfDefId@version".
func (e LedgerEntry) Key() string { return e.WfDefID + "@" + e.Version }

// Publication is an accepted {publicationId, policyDigest} pair.
type Publication struct {
	PublicationID string `json:"publicationId"`
	PolicyDigest  string `json:"policyDigest"`
}

// InventoryItem is one entry of a Knowledge replica inventory.
type InventoryItem struct {
	Kind   string `json:"kind"`
	ID     string `json:"id"`
	Digest string `json:"digest"`
}

// Lease is a rolling delivery lease as Go duration strings (e.g. "15m0s").
type Lease struct {
	RefreshAfter string `json:"refreshAfter"`
	ExpiresAfter string `json:"expiresAfter"`
}

// TargetEntry is one runtime target of the release: its identity, the
// envelope of the snapshot it serves and the digests a reviewer checks.
// ReleaseVersion is the release that created the snapshot; unchanged targets
// carry it (and the rest of the envelope) over from the base release.
type TargetEntry struct {
	Host                    string          `json:"host"`
	ServiceID               string          `json:"serviceId"`
	Audience                string          `json:"audience"`
	SubjectKind             string          `json:"subjectKind"`
	SubjectName             string          `json:"subjectName"`
	LeaseProfile            string          `json:"leaseProfile"`
	LeaseProfileDigest      string          `json:"leaseProfileDigest"`
	SnapshotID              string          `json:"snapshotId"`
	PublicationID           string          `json:"publicationId"`
	PolicySnapshotID        string          `json:"policySnapshotId"`
	ReleaseVersion          int64           `json:"releaseVersion"`
	PolicyVersion           int64           `json:"policyVersion"`
	SourceEventSequence     int64           `json:"sourceEventSequence"`
	SchemaVersion           int             `json:"schemaVersion"`
	RevocationEpoch         int64           `json:"revocationEpoch"`
	CompatibilityGeneration int64           `json:"compatibilityGeneration"`
	CreatedAt               string          `json:"createdAt"`
	ValidFrom               string          `json:"validFrom"`
	RefreshAfter            string          `json:"refreshAfter"`
	ExpiresAt               string          `json:"expiresAt"`
	DeliveryLease           Lease           `json:"deliveryLease"`
	PolicyDigest            string          `json:"policyDigest"`
	ContentDigest           string          `json:"contentDigest"`
	PropertySetDigest       string          `json:"propertySetDigest"`
	ArtifactDigest          string          `json:"artifactDigest"`
	Changed                 bool            `json:"changed"`
	Previous                *Publication    `json:"previous,omitempty"`
	Inventory               []InventoryItem `json:"inventory,omitempty"`
	Tombstones              []InventoryItem `json:"tombstones,omitempty"`
}

// Identity returns the target's runtime identity in env.
func (t *TargetEntry) Identity(env string) Identity {
	return Identity{Host: t.Host, ServiceID: t.ServiceID, EnvTag: env}
}

// Envelope returns the runtimePolicy envelope the target's snapshot carries.
func (t *TargetEntry) Envelope(env string) RuntimePolicy {
	return RuntimePolicy{
		PublicationID: t.PublicationID, ReleaseVersion: t.ReleaseVersion,
		PolicySnapshotID: t.PolicySnapshotID, PolicyVersion: t.PolicyVersion,
		PolicyDigest: t.PolicyDigest, ContentDigest: t.ContentDigest,
		Audience: t.Audience, Host: t.Host, ServiceID: t.ServiceID, EnvTag: env,
		SourceEventSequence: t.SourceEventSequence, SchemaVersion: t.SchemaVersion,
		CreatedAt: t.CreatedAt, ValidFrom: t.ValidFrom, RefreshAfter: t.RefreshAfter,
		ExpiresAt: t.ExpiresAt, RevocationEpoch: t.RevocationEpoch,
		CompatibilityGeneration: t.CompatibilityGeneration,
	}
}

// Target returns the entry for host/serviceId, or nil.
func (m *Manifest) Target(host, serviceID string) *TargetEntry {
	for i := range m.Targets {
		if m.Targets[i].Host == host && m.Targets[i].ServiceID == serviceID {
			return &m.Targets[i]
		}
	}
	return nil
}

// Subject returns the subject entry for kind/name, or nil.
func (m *Manifest) Subject(kind, name string) *Subject {
	for i := range m.Subjects {
		if m.Subjects[i].Kind == kind && m.Subjects[i].Name == name {
			return &m.Subjects[i]
		}
	}
	return nil
}

// Digest returns the releaseDigest of the sharded layout (see Files),
// without changing m.
func (m *Manifest) Digest() (string, error) {
	c := m.clone()
	if err := c.eachFile(true, func(string, []byte, bool) {}); err != nil {
		return "", err
	}
	return c.ReleaseDigest, nil
}

// legacyDigest is the releaseDigest of the single-file layout: "sha256:"
// over the JCS bytes of the manifest without its releaseDigest field.
func (m *Manifest) legacyDigest() (string, error) {
	v, err := m.value()
	if err != nil {
		return "", err
	}
	return digestOf(v)
}

func digestOf(v *render.Value) (string, error) {
	d, err := render.Digest(v)
	if err != nil {
		return "", fmt.Errorf("release digest: %w", err)
	}
	return d, nil
}

// Marshal sets ReleaseDigest and returns the release as one release
// archive (Archive of Files): the form in which releases are stored,
// hashed, compared and recorded.
func (m *Manifest) Marshal() ([]byte, error) { return m.MarshalSize(0) }

// ParseManifest reads a release strictly from a release archive (see
// ParseFiles) or, for releases written before the sharded layout, from a
// single-file manifest: YAML refusals as in internal/yamlstrict, unknown
// fields, a manifest that breaks its own invariants (Validate;
// ErrInvalidManifest) and a releaseDigest that does not match the content
// are errors. file names the manifest in messages.
func ParseManifest(file string, b []byte) (*Manifest, error) {
	if IsArchive(b) {
		files, err := SplitArchive(b)
		if err != nil {
			return nil, fmt.Errorf("parse release manifest %s: %w", file, err)
		}
		return ParseFiles(files)
	}
	return parseSingleFile(file, b)
}

// parseSingleFile reads a manifest of the single-file layout.
func parseSingleFile(file string, b []byte) (*Manifest, error) {
	doc, err := yamlstrict.Parse(file, b)
	if err != nil {
		return nil, fmt.Errorf("parse release manifest: %w", err)
	}
	canon, err := render.Canonical(doc.Value)
	if err != nil {
		return nil, fmt.Errorf("parse release manifest %s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("parse release manifest %s: %w", file, err)
	}
	if len(m.HostInputs) > 0 {
		return nil, fmt.Errorf("parse release manifest %s: %w: hostInputs in a single-file manifest", file, ErrInvalidManifest)
	}
	for _, x := range m.Subjects {
		if x.Host != "" {
			return nil, fmt.Errorf("parse release manifest %s: %w: subjects name no host in a single-file manifest", file, ErrInvalidManifest)
		}
	}
	for _, w := range m.Workflows {
		if w.Host != "" {
			return nil, fmt.Errorf("parse release manifest %s: %w: workflows name no host in a single-file manifest", file, ErrInvalidManifest)
		}
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("parse release manifest %s: %w", file, err)
	}
	want, err := m.legacyDigest()
	if err != nil {
		return nil, err
	}
	if m.ReleaseDigest != want {
		return nil, fmt.Errorf("parse release manifest %s: %w: releaseDigest %s, content digests to %s", file, ErrDigestMismatch, m.ReleaseDigest, want)
	}
	m.SingleFile = true
	return &m, nil
}
