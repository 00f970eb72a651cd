package bundle

import (
	"fmt"
	"regexp"
	"time"

	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/render"
)

// maxVersion is the largest version: 2^53-1, exact in every JSON reader.
const maxVersion = 1<<53 - 1

// TimeFormat is the one form of every manifest and envelope time: RFC 3339,
// UTC, whole seconds, "Z".
const TimeFormat = "2006-01-02T15:04:05Z"

var (
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// ParseTime parses a time in TimeFormat, refusing any other spelling.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeFormat, s)
	if err != nil || t.Format(TimeFormat) != s {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 UTC time of the form %s", s, TimeFormat)
	}
	return t, nil
}

// invalidf builds an ErrInvalidManifest naming the field.
func invalidf(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidManifest, field, fmt.Sprintf(format, args...))
}

// Validate checks the invariants a release manifest holds on its own,
// without the sources: identification; releaseVersion >= 1 (and at most
// 2^53-1), baseReleaseVersion = releaseVersion - 1 (0 only for release 1),
// sourceEventSequence = releaseVersion; times in RFC 3339 UTC; well-formed
// digests and ids; inputs, lease profiles, subjects, ledger and targets
// sorted and unique; every target identity in the identity grammar, its
// publicationId the one of the release that created it (at most this
// release), its window its lease profile applied to its createdAt
// (validFrom = createdAt, refreshAfter and expiresAt by the profile), its
// delivery lease the profile's, and changed exactly when this release
// created it. It does not check releaseDigest (ParseManifest does).
func (m *Manifest) Validate() error {
	if err := m.ReleaseHeader.Validate(); err != nil {
		return err
	}
	created, _ := ParseTime(m.CreatedAt) // checked above
	for i, in := range m.Inputs {
		f := fmt.Sprintf("inputs[%d]", i)
		if in.Path == "" || (i > 0 && in.Path <= m.Inputs[i-1].Path) {
			return invalidf(f+".path", "%q: inputs must be sorted by path and unique", in.Path)
		}
		if !digest.Valid(in.Digest) {
			return invalidf(f+".digest", "%q is not sha256:<64 hex>", in.Digest)
		}
	}
	profiles := map[string]*LeaseProfile{}
	for i := range m.LeaseProfiles {
		p := &m.LeaseProfiles[i]
		f := fmt.Sprintf("leaseProfiles[%d]", i)
		if p.Name == "" || (i > 0 && p.Name <= m.LeaseProfiles[i-1].Name) {
			return invalidf(f+".name", "%q: lease profiles must be sorted by name and unique", p.Name)
		}
		if err := p.check(); err != nil {
			return invalidf(f, "%v", err)
		}
		profiles[p.Name] = p
	}
	for i, s := range m.Subjects {
		f := fmt.Sprintf("subjects[%d]", i)
		if s.Kind == "" || s.Name == "" || (i > 0 && [2]string{s.Kind, s.Name} == [2]string{m.Subjects[i-1].Kind, m.Subjects[i-1].Name}) ||
			(i > 0 && (s.Kind < m.Subjects[i-1].Kind || s.Kind == m.Subjects[i-1].Kind && s.Name < m.Subjects[i-1].Name)) {
			return invalidf(f, "%s/%s: subjects must be named, sorted by kind and name and unique", s.Kind, s.Name)
		}
		if !uuidRE.MatchString(s.PolicySnapshotID) || !digest.Valid(s.PolicyDigest) || s.PolicyVersion < 1 {
			return invalidf(f, "policySnapshotId %q, policyDigest %q, policyVersion %d: want a lowercase UUID, sha256:<64 hex> and >= 1", s.PolicySnapshotID, s.PolicyDigest, s.PolicyVersion)
		}
	}
	for i, w := range m.Workflows {
		if !digest.Valid(w.Digest) || (w.State != "PUBLISHED" && w.State != "DRAFT") {
			return invalidf(fmt.Sprintf("workflows[%d]", i), "digest %q state %q: want sha256:<64 hex> and PUBLISHED or DRAFT", w.Digest, w.State)
		}
	}
	for i, e := range m.WorkflowLedger {
		f := fmt.Sprintf("workflowLedger[%d]", i)
		if e.WfDefID == "" || e.Version == "" || (i > 0 && e.Key() <= m.WorkflowLedger[i-1].Key()) {
			return invalidf(f, "%q: the ledger must be sorted by wfDefId@version and unique", e.Key())
		}
		if !digest.Valid(e.Digest) {
			return invalidf(f+".digest", "%q is not sha256:<64 hex>", e.Digest)
		}
		if e.PublishedIn < 1 || e.PublishedIn > m.ReleaseVersion {
			return invalidf(f+".publishedIn", "%d in release %d: want 1 to %d", e.PublishedIn, m.ReleaseVersion, m.ReleaseVersion)
		}
	}
	for i := range m.Targets {
		t := &m.Targets[i]
		if i > 0 {
			p := &m.Targets[i-1]
			if t.Host < p.Host || t.Host == p.Host && t.ServiceID <= p.ServiceID {
				return invalidf(fmt.Sprintf("targets[%d]", i), "%s/%s: targets must be sorted by host and serviceId and unique", t.Host, t.ServiceID)
			}
		}
		if err := m.checkTarget(t, created, profiles); err != nil {
			return err
		}
	}
	if m.ReleaseDigest != "" && !digest.Valid(m.ReleaseDigest) {
		return invalidf("releaseDigest", "%q is not sha256:<64 hex>", m.ReleaseDigest)
	}
	return nil
}

func (p *LeaseProfile) check() error {
	var d [4]time.Duration
	for i, s := range []string{p.ValidFor, p.RefreshAfter, p.Delivery.RefreshAfter, p.Delivery.ExpiresAfter} {
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			return fmt.Errorf("duration %q: want a positive Go duration", s)
		}
		d[i] = v
	}
	if d[1] >= d[0] || d[2] > d[3] {
		return fmt.Errorf("refreshAfter %s must be below validFor %s and delivery refreshAfter %s at most delivery expiresAfter %s", p.RefreshAfter, p.ValidFor, p.Delivery.RefreshAfter, p.Delivery.ExpiresAfter)
	}
	want, err := p.ComputeDigest()
	if err != nil {
		return err
	}
	if p.Digest != want {
		return fmt.Errorf("digest %s, the profile digests to %s: %w", p.Digest, want, ErrDigestMismatch)
	}
	return nil
}

// Validate checks the release parameters alone: apiVersion and kind, the
// envTag grammar, 1 <= releaseVersion <= 2^53-1, baseReleaseVersion =
// releaseVersion-1, createdAt in RFC 3339 UTC, sourceEventSequence =
// releaseVersion, non-negative compatibilityGeneration and revocationEpoch,
// this schema version and renderer profile.
func (h *ReleaseHeader) Validate() error {
	if h.APIVersion != ManifestAPIVersion || h.Kind != ManifestKind {
		return invalidf("apiVersion/kind", "%s/%s, want %s/%s", h.APIVersion, h.Kind, ManifestAPIVersion, ManifestKind)
	}
	if err := CheckEnvTag(h.EnvTag); err != nil {
		return invalidf("envTag", "%v", err)
	}
	if h.ReleaseVersion < 1 || h.ReleaseVersion > maxVersion {
		return invalidf("releaseVersion", "%d: want 1 to 2^53-1", h.ReleaseVersion)
	}
	if h.BaseReleaseVersion != h.ReleaseVersion-1 {
		return invalidf("baseReleaseVersion", "%d on release %d: want %d (a release builds on the one before it; 0 only for release 1)", h.BaseReleaseVersion, h.ReleaseVersion, h.ReleaseVersion-1)
	}
	if _, err := ParseTime(h.CreatedAt); err != nil {
		return invalidf("createdAt", "%v", err)
	}
	if h.SourceEventSequence != h.ReleaseVersion {
		return invalidf("sourceEventSequence", "%d on release %d: want the release version", h.SourceEventSequence, h.ReleaseVersion)
	}
	if h.CompatibilityGeneration < 0 || h.RevocationEpoch < 0 {
		return invalidf("compatibilityGeneration/revocationEpoch", "%d/%d: want >= 0", h.CompatibilityGeneration, h.RevocationEpoch)
	}
	if h.SchemaVersion != SchemaVersion {
		return invalidf("schemaVersion", "%d, want %d", h.SchemaVersion, SchemaVersion)
	}
	if h.Renderer != render.Profile {
		return invalidf("renderer", "%q, want %q", h.Renderer, render.Profile)
	}
	return nil
}

// checkTarget checks one target entry against the release and its lease
// profile.
func (m *Manifest) checkTarget(t *TargetEntry, created time.Time, profiles map[string]*LeaseProfile) error {
	id := t.Host + "/" + t.ServiceID
	bad := func(field, format string, args ...any) error {
		return invalidf("target "+id+": "+field, format, args...)
	}
	if err := CheckHost(t.Host); err != nil {
		return bad("host", "%v", err)
	}
	if err := CheckServiceID(t.ServiceID); err != nil {
		return bad("serviceId", "%v", err)
	}
	if Namespace(t.Audience) == "" {
		return bad("audience", "%q is not agent, gateway or knowledge", t.Audience)
	}
	if t.SubjectKind == "" || t.SubjectName == "" {
		return bad("subject", "empty")
	}
	for _, f := range []struct{ name, v string }{{"snapshotId", t.SnapshotID}, {"publicationId", t.PublicationID}, {"policySnapshotId", t.PolicySnapshotID}} {
		if !uuidRE.MatchString(f.v) {
			return bad(f.name, "%q is not a lowercase UUID", f.v)
		}
	}
	for _, f := range []struct{ name, v string }{{"policyDigest", t.PolicyDigest}, {"contentDigest", t.ContentDigest}, {"propertySetDigest", t.PropertySetDigest}, {"artifactDigest", t.ArtifactDigest}, {"leaseProfileDigest", t.LeaseProfileDigest}} {
		if !digest.Valid(f.v) {
			return bad(f.name, "%q is not sha256:<64 hex>", f.v)
		}
	}
	if t.ReleaseVersion < 1 || t.ReleaseVersion > m.ReleaseVersion {
		return bad("releaseVersion", "%d in release %d: a snapshot is created by this release or an earlier one", t.ReleaseVersion, m.ReleaseVersion)
	}
	if want := PublicationID(m.EnvTag, t.ReleaseVersion); t.PublicationID != want {
		return bad("publicationId", "%s, but release %d of %s is publication %s", t.PublicationID, t.ReleaseVersion, m.EnvTag, want)
	}
	if t.Changed != (t.ReleaseVersion == m.ReleaseVersion) {
		return bad("changed", "%v for a snapshot of release %d in release %d: a target is changed exactly when this release created its snapshot", t.Changed, t.ReleaseVersion, m.ReleaseVersion)
	}
	if t.SourceEventSequence != t.ReleaseVersion {
		return bad("sourceEventSequence", "%d: want the snapshot's release %d", t.SourceEventSequence, t.ReleaseVersion)
	}
	if t.PolicyVersion < 1 {
		return bad("policyVersion", "%d: want >= 1", t.PolicyVersion)
	}
	if t.SchemaVersion != SchemaVersion {
		return bad("schemaVersion", "%d, want %d", t.SchemaVersion, SchemaVersion)
	}
	if t.RevocationEpoch < 0 || t.RevocationEpoch > m.RevocationEpoch {
		return bad("revocationEpoch", "%d in a release of epoch %d: want 0 to %d", t.RevocationEpoch, m.RevocationEpoch, m.RevocationEpoch)
	}
	if t.CompatibilityGeneration != m.CompatibilityGeneration {
		return bad("compatibilityGeneration", "%d in a release of generation %d", t.CompatibilityGeneration, m.CompatibilityGeneration)
	}
	var times [4]time.Time
	for i, f := range []struct{ name, v string }{{"createdAt", t.CreatedAt}, {"validFrom", t.ValidFrom}, {"refreshAfter", t.RefreshAfter}, {"expiresAt", t.ExpiresAt}} {
		v, err := ParseTime(f.v)
		if err != nil {
			return bad(f.name, "%v", err)
		}
		times[i] = v
	}
	if t.Changed && !times[0].Equal(created) {
		return bad("createdAt", "%s in a release created at %s: a snapshot the release creates has the release's createdAt", t.CreatedAt, m.CreatedAt)
	}
	p := profiles[t.LeaseProfile]
	if p == nil {
		return bad("leaseProfile", "%q is not among the manifest's lease profiles", t.LeaseProfile)
	}
	if t.LeaseProfileDigest != p.Digest {
		return bad("leaseProfileDigest", "%s, profile %s digests to %s", t.LeaseProfileDigest, p.Name, p.Digest)
	}
	validFor, _ := time.ParseDuration(p.ValidFor)
	refresh, _ := time.ParseDuration(p.RefreshAfter)
	for _, w := range []struct {
		name string
		got  time.Time
		want time.Time
	}{{"validFrom", times[1], times[0]}, {"refreshAfter", times[2], times[0].Add(refresh)}, {"expiresAt", times[3], times[0].Add(validFor)}} {
		if !w.got.Equal(w.want) {
			return bad(w.name, "%s, but lease profile %s applied to createdAt %s gives %s", w.got.Format(TimeFormat), p.Name, t.CreatedAt, w.want.Format(TimeFormat))
		}
	}
	if t.DeliveryLease != p.Delivery {
		return bad("deliveryLease", "%+v, lease profile %s has %+v", t.DeliveryLease, p.Name, p.Delivery)
	}
	if t.Previous != nil && (!uuidRE.MatchString(t.Previous.PublicationID) || !digest.Valid(t.Previous.PolicyDigest)) {
		return bad("previous", "%+v: want a lowercase UUID and sha256:<64 hex>", *t.Previous)
	}
	for _, list := range [][]InventoryItem{t.Inventory, t.Tombstones} {
		for _, it := range list {
			if !digest.Valid(it.Digest) {
				return bad("inventory", "item %s/%s digest %q is not sha256:<64 hex>", it.Kind, it.ID, it.Digest)
			}
		}
	}
	return nil
}
