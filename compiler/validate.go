package compiler

import (
	"errors"
	"fmt"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
	"github.com/configpub/configpub/schemas"
)

// envelopeOrder is the normative order of the runtimePolicy members.
var envelopeOrder = []string{"publicationId", "releaseVersion", "policySnapshotId", "policyVersion", "policyDigest",
	"contentDigest", "audience", "host", "serviceId", "envTag", "sourceEventSequence", "schemaVersion",
	"createdAt", "validFrom", "refreshAfter", "expiresAt", "revocationEpoch", "compatibilityGeneration"}

// ArtifactReport describes a values.yml that passed validation.
type ArtifactReport struct {
	Audience      string
	Envelope      bundle.RuntimePolicy
	ContentDigest string // recomputed; equals Envelope.ContentDigest
	// PropertySetDigest is recomputed over the settings (the members after
	// the namespace); the file records none, see CheckCompiled.
	PropertySetDigest string
	ArtifactDigest    string // sha256 of the exact bytes
}

// ValidateArtifact checks values.yml bytes: strict YAML, the audience schema
// (audience from runtimePolicy.audience, or the audience argument when
// given; they must agree), the schema's cross-field rules, the envelope's
// position and member order, and that runtimePolicy.contentDigest is the
// RFC 8785 digest of the namespace. file names the input in messages.
func ValidateArtifact(file string, b []byte, audience string) (*ArtifactReport, error) {
	doc, err := yamlstrict.Parse(file, b)
	if err != nil {
		return nil, fromStrict(err)
	}
	v := doc.Value
	if v.Kind != render.KindMap {
		return nil, &SourceError{File: file, Line: 1, Err: errors.New("values.yml must be a map")}
	}
	if rp := v.Get("runtimePolicy"); rp != nil && rp.Kind == render.KindMap {
		if a := rp.Get("audience"); a != nil && a.Kind == render.KindString {
			if audience != "" && audience != a.Str {
				return nil, &SourceError{File: file, Line: doc.Line("runtimePolicy", "audience"), Field: "runtimePolicy.audience", Err: fmt.Errorf("audience %q, want %q", a.Str, audience)}
			}
			audience = a.Str
		}
	}
	if bundle.Namespace(audience) == "" {
		return nil, &SourceError{File: file, Line: 1, Field: "runtimePolicy.audience", Err: errors.New("cannot tell the audience: runtimePolicy.audience is missing; name it explicitly")}
	}
	set, err := schemas.Default()
	if err != nil {
		return nil, err
	}
	plain := v.ToAny()
	var probs []schemas.Problem
	omitted := 0
	if err := set.Validate("artifact/"+audience, plain); err != nil {
		var ve *schemas.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		probs, omitted = ve.Problems, ve.Omitted
	}
	rules, err := schemas.RulesFor("artifact/" + audience)
	if err != nil {
		return nil, err
	}
	probs = append(probs, rules.Check(plain)...)
	if len(probs) > 0 {
		if len(probs) > schemas.MaxProblems {
			omitted += len(probs) - schemas.MaxProblems
			probs = probs[:schemas.MaxProblems]
		}
		return nil, &ArtifactError{Target: file, Audience: audience, Problems: probs, Omitted: omitted}
	}
	ns := bundle.Namespace(audience)
	if len(v.Keys) < 2 || v.Keys[0] != "runtimePolicy" || v.Keys[1] != ns {
		return nil, &SourceError{File: file, Line: 1, Err: fmt.Errorf("runtimePolicy must come first and %s second", ns)}
	}
	rp := v.Get("runtimePolicy")
	for i, k := range envelopeOrder {
		if rp.Keys[i] != k {
			return nil, &SourceError{File: file, Line: doc.Line("runtimePolicy", rp.Keys[i]), Field: "runtimePolicy." + rp.Keys[i], Err: fmt.Errorf("envelope member %d is %s, want %s (normative order)", i+1, rp.Keys[i], k)}
		}
	}
	cd, err := render.Digest(v.Get(ns))
	if err != nil {
		return nil, err
	}
	env := bundle.RuntimePolicy{
		PublicationID: rp.Get("publicationId").Str, ReleaseVersion: rp.Get("releaseVersion").Int,
		PolicySnapshotID: rp.Get("policySnapshotId").Str, PolicyVersion: rp.Get("policyVersion").Int,
		PolicyDigest: rp.Get("policyDigest").Str, ContentDigest: rp.Get("contentDigest").Str,
		Audience: audience, Host: rp.Get("host").Str, ServiceID: rp.Get("serviceId").Str, EnvTag: rp.Get("envTag").Str,
		SourceEventSequence: rp.Get("sourceEventSequence").Int, SchemaVersion: int(rp.Get("schemaVersion").Int),
		CreatedAt: rp.Get("createdAt").Str, ValidFrom: rp.Get("validFrom").Str, RefreshAfter: rp.Get("refreshAfter").Str,
		ExpiresAt: rp.Get("expiresAt").Str, RevocationEpoch: rp.Get("revocationEpoch").Int,
		CompatibilityGeneration: rp.Get("compatibilityGeneration").Int,
	}
	if cd != env.ContentDigest {
		return nil, &SourceError{File: file, Line: doc.Line("runtimePolicy", "contentDigest"), Field: "runtimePolicy.contentDigest",
			Err: fmt.Errorf("%w: %s recorded, %s computed over %s", bundle.ErrDigestMismatch, env.ContentDigest, cd, ns)}
	}
	if audience == bundle.AudienceKnowledge {
		inv := v.Get(ns).Get("inventory")
		d, err := render.Digest(render.Map().Add("items", inv.Get("items")).Add("tombstones", inv.Get("tombstones")))
		if err != nil {
			return nil, err
		}
		if d != inv.Get("digest").Str {
			return nil, &SourceError{File: file, Line: doc.Line(ns, "inventory", "digest"), Field: ns + ".inventory.digest",
				Err: fmt.Errorf("%w: inventory digest %s recorded, %s computed", bundle.ErrDigestMismatch, inv.Get("digest").Str, d)}
		}
	}
	// The settings: every member after the namespace, flattened as
	// compiled; their canonical JSON is the propertySetDigest.
	settings := render.Map()
	for i, k := range v.Keys[2:] {
		settings.Add(k, v.Vals[i+2])
	}
	ps, err := render.Canonical(settings.SortKeys())
	if err != nil {
		return nil, &SourceError{File: file, Line: 1, Err: fmt.Errorf("settings: %w", err)}
	}
	return &ArtifactReport{Audience: audience, Envelope: env, ContentDigest: cd, PropertySetDigest: render.BytesDigest(ps),
		ArtifactDigest: render.BytesDigest(b)}, nil
}

// CheckCompiled compares a values.yml that passed ValidateArtifact with its
// target's entry in m, the release it was compiled in (manifest names it in
// messages): the same environment and publication, then its settings
// (propertySetDigest: the values.yml holds no digest of them, so a setting
// edited after rendering passes ValidateArtifact), its namespace
// (contentDigest) and its exact bytes (artifactDigest) must be what the
// release records. A mismatch wraps bundle.ErrDigestMismatch.
func (r *ArtifactReport) CheckCompiled(file, manifest string, m *bundle.Manifest) error {
	e := &r.Envelope
	id := e.Host + "/" + e.ServiceID
	if m.EnvTag != e.EnvTag {
		return fmt.Errorf("%s: %s is a release of %s; the file is an artifact of %s", file, manifest, m.EnvTag, e.EnvTag)
	}
	t := m.Target(e.Host, e.ServiceID)
	if t == nil {
		return fmt.Errorf("%s: target %s: release %d (%s) has no such target", file, id, m.ReleaseVersion, manifest)
	}
	if t.PublicationID != e.PublicationID {
		return fmt.Errorf("%s: target %s: the file is publication %s (release %d), release %d (%s) holds publication %s (release %d): validate it against the release it was compiled in",
			file, id, e.PublicationID, e.ReleaseVersion, m.ReleaseVersion, manifest, t.PublicationID, t.ReleaseVersion)
	}
	switch {
	case r.PropertySetDigest != t.PropertySetDigest:
		return fmt.Errorf("%s: target %s: %w: the settings do not match what was compiled (edited after rendering?): propertySetDigest %s computed, %s recorded in release %d (%s)",
			file, id, bundle.ErrDigestMismatch, r.PropertySetDigest, t.PropertySetDigest, m.ReleaseVersion, manifest)
	case r.ContentDigest != t.ContentDigest:
		return fmt.Errorf("%s: target %s: %w: the %s namespace does not match what was compiled: contentDigest %s computed, %s recorded in release %d (%s)",
			file, id, bundle.ErrDigestMismatch, bundle.Namespace(r.Audience), r.ContentDigest, t.ContentDigest, m.ReleaseVersion, manifest)
	case r.ArtifactDigest != t.ArtifactDigest:
		return fmt.Errorf("%s: target %s: %w: the bytes do not match what was compiled (the envelope or the layout edited): artifactDigest %s computed, %s recorded in release %d (%s)",
			file, id, bundle.ErrDigestMismatch, r.ArtifactDigest, t.ArtifactDigest, m.ReleaseVersion, manifest)
	}
	return nil
}
