package bundle

import (
	"github.com/configpub/configpub/internal/render"
)

// value builds the manifest's value tree, members in declaration order,
// without releaseDigest. Empty lists are written as [] (never null); the
// optional target members are omitted when empty.
func (m *Manifest) value() (*render.Value, error) {
	s, i := render.String, render.Int
	inputs, profiles := inputsValue(m.Inputs), profilesValue(m.LeaseProfiles)
	subjects := render.List()
	for _, x := range m.Subjects {
		subjects.Items = append(subjects.Items, render.Map().
			Add("kind", s(x.Kind)).Add("name", s(x.Name)).Add("policySnapshotId", s(x.PolicySnapshotID)).
			Add("policyVersion", i(x.PolicyVersion)).Add("policyDigest", s(x.PolicyDigest)))
	}
	workflows := render.List()
	for _, w := range m.Workflows {
		workflows.Items = append(workflows.Items, render.Map().
			Add("name", s(w.Name)).Add("wfDefId", s(w.WfDefID)).Add("version", s(w.Version)).
			Add("state", s(w.State)).Add("digest", s(w.Digest)))
	}
	ledger := render.List()
	for _, e := range m.WorkflowLedger {
		ledger.Items = append(ledger.Items, render.Map().
			Add("wfDefId", s(e.WfDefID)).Add("version", s(e.Version)).
			Add("digest", s(e.Digest)).Add("publishedIn", i(e.PublishedIn)))
	}
	targets := render.List()
	targets.Items = make([]*render.Value, 0, len(m.Targets))
	for k := range m.Targets {
		targets.Items = append(targets.Items, m.Targets[k].value())
	}
	return render.Map().
		Add("apiVersion", s(m.APIVersion)).Add("kind", s(m.Kind)).Add("envTag", s(m.EnvTag)).
		Add("releaseVersion", i(m.ReleaseVersion)).Add("baseReleaseVersion", i(m.BaseReleaseVersion)).
		Add("createdAt", s(m.CreatedAt)).Add("sourceEventSequence", i(m.SourceEventSequence)).
		Add("compatibilityGeneration", i(m.CompatibilityGeneration)).Add("revocationEpoch", i(m.RevocationEpoch)).
		Add("schemaVersion", i(int64(m.SchemaVersion))).Add("renderer", s(m.Renderer)).
		Add("inputs", inputs).Add("leaseProfiles", profiles).Add("subjects", subjects).Add("workflows", workflows).Add("workflowLedger", ledger).Add("targets", targets), nil
}

// value is the target entry as a document, members in manifest order.
func (t *TargetEntry) value() *render.Value {
	s, i := render.String, render.Int
	v := render.Map().
		Add("host", s(t.Host)).Add("serviceId", s(t.ServiceID)).Add("audience", s(t.Audience)).
		Add("subjectKind", s(t.SubjectKind)).Add("subjectName", s(t.SubjectName)).
		Add("leaseProfile", s(t.LeaseProfile)).Add("leaseProfileDigest", s(t.LeaseProfileDigest)).
		Add("snapshotId", s(t.SnapshotID)).Add("publicationId", s(t.PublicationID)).
		Add("policySnapshotId", s(t.PolicySnapshotID)).Add("releaseVersion", i(t.ReleaseVersion)).
		Add("policyVersion", i(t.PolicyVersion)).Add("sourceEventSequence", i(t.SourceEventSequence)).
		Add("schemaVersion", i(int64(t.SchemaVersion))).Add("revocationEpoch", i(t.RevocationEpoch)).
		Add("compatibilityGeneration", i(t.CompatibilityGeneration)).
		Add("createdAt", s(t.CreatedAt)).Add("validFrom", s(t.ValidFrom)).
		Add("refreshAfter", s(t.RefreshAfter)).Add("expiresAt", s(t.ExpiresAt)).
		Add("deliveryLease", render.Map().Add("refreshAfter", s(t.DeliveryLease.RefreshAfter)).Add("expiresAfter", s(t.DeliveryLease.ExpiresAfter))).
		Add("policyDigest", s(t.PolicyDigest)).Add("contentDigest", s(t.ContentDigest)).
		Add("propertySetDigest", s(t.PropertySetDigest)).Add("artifactDigest", s(t.ArtifactDigest)).
		Add("changed", render.Bool(t.Changed))
	if t.Previous != nil {
		v.Add("previous", render.Map().Add("publicationId", s(t.Previous.PublicationID)).Add("policyDigest", s(t.Previous.PolicyDigest)))
	}
	if len(t.Inventory) > 0 {
		v.Add("inventory", items(t.Inventory))
	}
	if len(t.Tombstones) > 0 {
		v.Add("tombstones", items(t.Tombstones))
	}
	return v
}

// inputsValue is the [{path, digest}] list of inputs.
func inputsValue(in []Input) *render.Value {
	l := render.List()
	for _, x := range in {
		l.Items = append(l.Items, render.Map().Add("path", render.String(x.Path)).Add("digest", render.String(x.Digest)))
	}
	return l
}

// profilesValue is the list of lease profiles, members in declaration
// order.
func profilesValue(in []LeaseProfile) *render.Value {
	s := render.String
	l := render.List()
	for _, p := range in {
		l.Items = append(l.Items, render.Map().
			Add("name", s(p.Name)).Add("digest", s(p.Digest)).
			Add("validFor", s(p.ValidFor)).Add("refreshAfter", s(p.RefreshAfter)).
			Add("delivery", render.Map().Add("refreshAfter", s(p.Delivery.RefreshAfter)).Add("expiresAfter", s(p.Delivery.ExpiresAfter))))
	}
	return l
}

func items(in []InventoryItem) *render.Value {
	l := render.List()
	for _, it := range in {
		l.Items = append(l.Items, render.Map().Add("kind", render.String(it.Kind)).Add("id", render.String(it.ID)).Add("digest", render.String(it.Digest)))
	}
	return l
}
