package compiler

import (
	"errors"
	"fmt"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/schemas"
)

// envelopeValue renders the runtimePolicy envelope in its normative order.
func envelopeValue(e *bundle.RuntimePolicy) *render.Value {
	return render.Map().
		Add("publicationId", render.String(e.PublicationID)).
		Add("releaseVersion", render.Int(e.ReleaseVersion)).
		Add("policySnapshotId", render.String(e.PolicySnapshotID)).
		Add("policyVersion", render.Int(e.PolicyVersion)).
		Add("policyDigest", render.String(e.PolicyDigest)).
		Add("contentDigest", render.String(e.ContentDigest)).
		Add("audience", render.String(e.Audience)).
		Add("host", render.String(e.Host)).
		Add("serviceId", render.String(e.ServiceID)).
		Add("envTag", render.String(e.EnvTag)).
		Add("sourceEventSequence", render.Int(e.SourceEventSequence)).
		Add("schemaVersion", render.Int(int64(e.SchemaVersion))).
		Add("createdAt", render.String(e.CreatedAt)).
		Add("validFrom", render.String(e.ValidFrom)).
		Add("refreshAfter", render.String(e.RefreshAfter)).
		Add("expiresAt", render.String(e.ExpiresAt)).
		Add("revocationEpoch", render.Int(e.RevocationEpoch)).
		Add("compatibilityGeneration", render.Int(e.CompatibilityGeneration))
}

// artifactTree assembles values.yml: envelope, namespace, flat settings.
func artifactTree(env *bundle.RuntimePolicy, namespace string, ns, flat *render.Value) *render.Value {
	doc := &render.Value{Kind: render.KindMap, Keys: make([]string, 0, 2+len(flat.Keys)), Vals: make([]*render.Value, 0, 2+len(flat.Keys))}
	doc.Add("runtimePolicy", envelopeValue(env)).Add(namespace, ns)
	for i, k := range flat.Keys {
		doc.Add(k, flat.Vals[i])
	}
	return doc
}

// validator checks rendered artifacts against their audience schema, the
// schema's cross-field rules and the allowlist's forbidden names.
type validator struct {
	set   *schemas.Set
	rules map[string]*schemas.Rules
	proj  map[string]*projector
	plain render.AnyBufferPool // each worker's artifacts in turn reuse one
}

func newValidator(set *schemas.Set, proj map[string]*projector) (*validator, error) {
	v := &validator{set: set, rules: map[string]*schemas.Rules{}, proj: proj}
	for _, aud := range []string{bundle.AudienceAgent, bundle.AudienceGateway, bundle.AudienceKnowledge} {
		r, err := schemas.RulesFor("artifact/" + aud)
		if err != nil {
			return nil, err
		}
		v.rules[aud] = r
	}
	return v, nil
}

// ArtifactError reports a rendered artifact that failed validation.
type ArtifactError struct {
	Target   string // host/serviceId/envTag
	Audience string
	Problems []schemas.Problem
	Omitted  int
}

func (e *ArtifactError) Error() string {
	allMissing := len(e.Problems) > 0
	for _, p := range e.Problems {
		allMissing = allMissing && p.Message == "missing required property"
	}
	if allMissing {
		// The bounded list of missing mandatory properties.
		names := make([]string, len(e.Problems))
		for i, p := range e.Problems {
			names[i] = p.Pointer()
		}
		msg := fmt.Sprintf("%s (%s artifact): missing %d mandatory properties: %s", e.Target, e.Audience, len(e.Problems)+e.Omitted, strings.Join(names, ", "))
		if e.Omitted > 0 {
			msg += fmt.Sprintf(", and %d more", e.Omitted)
		}
		return msg
	}
	msg := fmt.Sprintf("%s (%s artifact): ", e.Target, e.Audience)
	for i, p := range e.Problems {
		if i > 0 {
			msg += "; "
		}
		ptr := p.Pointer()
		if ptr == "" {
			ptr = "/"
		}
		msg += ptr + ": " + p.Message
	}
	if e.Omitted > 0 {
		msg += fmt.Sprintf("; and %d more", e.Omitted)
	}
	return msg
}

// Unwrap returns ErrInvalidArtifact.
func (e *ArtifactError) Unwrap() error { return ErrInvalidArtifact }

func (v *validator) check(target, audience string, doc *render.Value) error {
	buf := v.plain.Get()
	defer v.plain.Put(buf) // nothing below keeps plain: problems are strings
	plain := buf.ToAny(doc)
	var probs []schemas.Problem
	omitted := 0
	if err := v.set.Validate("artifact/"+audience, plain); err != nil {
		var ve *schemas.ValidationError
		if !errors.As(err, &ve) {
			return err
		}
		probs = append(probs, ve.Problems...)
		omitted = ve.Omitted
	}
	probs = append(probs, v.rules[audience].Check(plain)...)
	if p := v.proj[audience]; p != nil {
		if ns := doc.Get(bundle.Namespace(audience)); ns != nil {
			if bad := p.forbidden(ns); bad != "" {
				probs = append(probs, schemas.Problem{Path: append([]string{bundle.Namespace(audience)}, strings.Split(bad[1:], "/")...), Message: "forbidden for audience " + audience})
			}
		}
	}
	if len(probs) == 0 {
		return nil
	}
	if len(probs) > schemas.MaxProblems {
		omitted += len(probs) - schemas.MaxProblems
		probs = probs[:schemas.MaxProblems]
	}
	return &ArtifactError{Target: target, Audience: audience, Problems: probs, Omitted: omitted}
}
