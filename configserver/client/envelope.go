package client

import (
	"strconv"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
)

// envelopeField binds one runtimePolicy field to its struct slot. Exactly one
// of str and num is set.
type envelopeField struct {
	name string
	str  func(*bundle.RuntimePolicy) *string
	num  func(*bundle.RuntimePolicy) *int64
}

// envelopeFields lists runtimePolicy in normative order.
// schemaVersion is handled separately (it is an int and checked first).
var envelopeFields = []envelopeField{
	{name: "publicationId", str: func(e *bundle.RuntimePolicy) *string { return &e.PublicationID }},
	{name: "releaseVersion", num: func(e *bundle.RuntimePolicy) *int64 { return &e.ReleaseVersion }},
	{name: "policySnapshotId", str: func(e *bundle.RuntimePolicy) *string { return &e.PolicySnapshotID }},
	{name: "policyVersion", num: func(e *bundle.RuntimePolicy) *int64 { return &e.PolicyVersion }},
	{name: "policyDigest", str: func(e *bundle.RuntimePolicy) *string { return &e.PolicyDigest }},
	{name: "contentDigest", str: func(e *bundle.RuntimePolicy) *string { return &e.ContentDigest }},
	{name: "audience", str: func(e *bundle.RuntimePolicy) *string { return &e.Audience }},
	{name: "host", str: func(e *bundle.RuntimePolicy) *string { return &e.Host }},
	{name: "serviceId", str: func(e *bundle.RuntimePolicy) *string { return &e.ServiceID }},
	{name: "envTag", str: func(e *bundle.RuntimePolicy) *string { return &e.EnvTag }},
	{name: "sourceEventSequence", num: func(e *bundle.RuntimePolicy) *int64 { return &e.SourceEventSequence }},
	{name: "createdAt", str: func(e *bundle.RuntimePolicy) *string { return &e.CreatedAt }},
	{name: "validFrom", str: func(e *bundle.RuntimePolicy) *string { return &e.ValidFrom }},
	{name: "refreshAfter", str: func(e *bundle.RuntimePolicy) *string { return &e.RefreshAfter }},
	{name: "expiresAt", str: func(e *bundle.RuntimePolicy) *string { return &e.ExpiresAt }},
	{name: "revocationEpoch", num: func(e *bundle.RuntimePolicy) *int64 { return &e.RevocationEpoch }},
	{name: "compatibilityGeneration", num: func(e *bundle.RuntimePolicy) *int64 { return &e.CompatibilityGeneration }},
}

// decodeEnvelope fills env from the runtimePolicy mapping strictly.
func decodeEnvelope(n *yaml.Node, env *bundle.RuntimePolicy) error {
	if n.Kind != yaml.MappingNode {
		return reject(ReasonInvalidField, pos(n, "runtimePolicy"), "want a mapping")
	}
	// schemaVersion first: a document of another schema version is reported
	// as such, not as a list of fields this version does not know.
	found := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "schemaVersion" {
			v := n.Content[i+1]
			sv, err := strconv.ParseInt(v.Value, 10, 64)
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || err != nil {
				return reject(ReasonInvalidField, pos(v, "runtimePolicy.schemaVersion"), "want an integer")
			}
			if sv != bundle.SchemaVersion {
				return reject(ReasonSchemaUnsupported, pos(v, "runtimePolicy.schemaVersion"), "schemaVersion %d, this client supports %d", sv, bundle.SchemaVersion)
			}
			env.SchemaVersion = int(sv)
			found = true
		}
	}
	if !found {
		return reject(ReasonMissingField, pos(n, "runtimePolicy.schemaVersion"), "field is missing")
	}
	set := make(map[string]bool, len(envelopeFields)+1)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		// The strict reader has refused non-string and duplicate keys.
		key := k.Value
		set[key] = true
		if key == "schemaVersion" {
			continue
		}
		f := lookupEnvelopeField(key)
		if f == nil {
			return reject(ReasonUnknownField, pos(k, "runtimePolicy."+key), "not a runtimePolicy field of schema version %d", bundle.SchemaVersion)
		}
		field := pos(v, "runtimePolicy."+key)
		if v.Kind != yaml.ScalarNode {
			return reject(ReasonInvalidField, field, "want a scalar")
		}
		if f.str != nil {
			if t := v.ShortTag(); t != "!!str" && t != "!!timestamp" {
				return reject(ReasonInvalidField, field, "want a string, got %s", t)
			}
			if v.Value == "" {
				return reject(ReasonInvalidField, field, "empty")
			}
			*f.str(env) = v.Value
			continue
		}
		x, err := strconv.ParseInt(v.Value, 10, 64)
		if v.ShortTag() != "!!int" || err != nil {
			return reject(ReasonInvalidField, field, "want a decimal integer")
		}
		*f.num(env) = x
	}
	for _, f := range envelopeFields {
		if !set[f.name] {
			return reject(ReasonMissingField, pos(n, "runtimePolicy."+f.name), "field is missing")
		}
	}
	return checkEnvelopeWindow(env)
}

func lookupEnvelopeField(name string) *envelopeField {
	for i := range envelopeFields {
		if envelopeFields[i].name == name {
			return &envelopeFields[i]
		}
	}
	return nil
}

// checkEnvelopeWindow parses the envelope times and requires
// validFrom <= refreshAfter < expiresAt.
func checkEnvelopeWindow(env *bundle.RuntimePolicy) error {
	_, err := parseWindow("runtimePolicy", env.ValidFrom, env.RefreshAfter, env.ExpiresAt)
	if err != nil {
		return err
	}
	if _, err := parseTime("runtimePolicy.createdAt", env.CreatedAt); err != nil {
		return err
	}
	return nil
}

// window is a parsed validity window.
type window struct {
	ValidFrom, RefreshAfter, ExpiresAt time.Time
}

func parseWindow(prefix, from, refresh, expires string) (window, error) {
	var w window
	var err error
	if w.ValidFrom, err = parseTime(prefix+".validFrom", from); err != nil {
		return w, err
	}
	if w.RefreshAfter, err = parseTime(prefix+".refreshAfter", refresh); err != nil {
		return w, err
	}
	if w.ExpiresAt, err = parseTime(prefix+".expiresAt", expires); err != nil {
		return w, err
	}
	if w.RefreshAfter.Before(w.ValidFrom) || !w.RefreshAfter.Before(w.ExpiresAt) {
		return w, reject(ReasonInvalidField, prefix+".refreshAfter", "want validFrom %s <= refreshAfter %s < expiresAt %s", from, refresh, expires)
	}
	return w, nil
}

func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, reject(ReasonInvalidField, field, "%q is not an RFC 3339 time", s)
	}
	return t, nil
}
