package client

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// document is a strictly parsed values.yml.
type document struct {
	Envelope  bundle.RuntimePolicy
	Namespace map[string]any // JSON-compatible value of the audience namespace
	Settings  map[string]any // the flat settings properties ("server.httpsPort": 8443); nil when none
	namespace *render.Value  // the namespace as read, for its canonical digest
	props     *render.Value  // the settings properties as read, for propertySetDigest
}

// parseValues parses values.yml for audience with the reader the compiler
// uses for its sources (internal/yamlstrict: exactly one YAML document; no
// duplicate or non-string keys, anchors, aliases or merge keys; no values
// without an exact JSON equivalent; nesting and size limits), then checks the
// shape: the top level is the runtimePolicy envelope, the audience namespace
// and the flat settings properties (every other key); another audience's
// namespace is an unknown field (it never belongs in this projection); every
// envelope field present with its type and no unknown one. schemaVersion is
// checked before the other envelope fields so that a future schema is
// reported as SCHEMA_UNSUPPORTED rather than as unknown fields.
func parseValues(b []byte, audience string) (*document, error) {
	parsed, err := yamlstrict.Parse("values.yml", b)
	if err != nil {
		return nil, strictError(err)
	}
	if parsed.Value.Kind != render.KindMap || parsed.Node.Kind != yaml.MappingNode {
		return nil, reject(ReasonParse, "values.yml", "top level is not a mapping")
	}
	top := parsed.Value
	ns := bundle.Namespace(audience)
	doc := document{props: render.Map()}
	var envNode *yaml.Node
	for i, key := range top.Keys {
		// The value tree keeps the document's key order, so key i is at
		// Node.Content[2i].
		k, v := parsed.Node.Content[2*i], parsed.Node.Content[2*i+1]
		switch key {
		case "runtimePolicy":
			envNode = v
		case ns:
			doc.namespace = top.Vals[i]
			if doc.namespace.Kind != render.KindMap {
				return nil, reject(ReasonInvalidField, pos(v, ns), "want a mapping")
			}
		case "agentPolicy", "gatewayPolicy", "knowledgePolicy":
			return nil, reject(ReasonUnknownField, pos(k, key), "another audience's namespace in a %s artifact", audience)
		default:
			if doc.Settings == nil {
				doc.Settings = map[string]any{}
			}
			doc.Settings[key] = plain(top.Vals[i])
			doc.props.Add(key, top.Vals[i])
		}
	}
	if envNode == nil {
		return nil, reject(ReasonMissingField, "values.yml:runtimePolicy", "envelope is missing")
	}
	if err := decodeEnvelope(envNode, &doc.Envelope); err != nil {
		return nil, err
	}
	if doc.namespace == nil {
		return nil, reject(ReasonMissingField, "values.yml:"+ns, "audience namespace is missing")
	}
	doc.Namespace = plain(doc.namespace).(map[string]any)
	return &doc, nil
}

// strictError maps a refusal of the strict reader to the client's reasons.
func strictError(err error) error {
	var se *yamlstrict.Error
	if !errors.As(err, &se) {
		return &VerificationError{Reason: ReasonParse, Field: "values.yml", Err: err}
	}
	field := "values.yml"
	if se.Field != "" {
		field = fmt.Sprintf("values.yml:%d:%s", se.Line, se.Field)
	}
	reason := ReasonInvalidField
	switch se.Class {
	case yamlstrict.Syntax:
		reason = ReasonParse
	case yamlstrict.DuplicateKey:
		reason = ReasonDuplicateKey
	}
	return reject(reason, field, "%s", se.Msg)
}

// pos renders "values.yml:line:field".
func pos(n *yaml.Node, field string) string {
	return fmt.Sprintf("values.yml:%d:%s", n.Line, field)
}

// plain converts a value tree to the JSON-compatible Go values a Snapshot
// carries: map[string]any, []any, string, int64, float64, bool or nil.
func plain(v *render.Value) any {
	switch v.Kind {
	case render.KindMap:
		m := make(map[string]any, len(v.Keys))
		for i, k := range v.Keys {
			m[k] = plain(v.Vals[i])
		}
		return m
	case render.KindList:
		s := make([]any, len(v.Items))
		for i, it := range v.Items {
			s[i] = plain(it)
		}
		return s
	case render.KindString:
		return v.Str
	case render.KindInt:
		return v.Int
	case render.KindFloat:
		return v.Float
	case render.KindBool:
		return v.Bool
	}
	return nil
}
