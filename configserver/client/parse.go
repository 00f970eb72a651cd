package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
)

// maxSafeInteger is 2^53: larger integers have no exact JSON (IEEE 754) form.
const maxSafeInteger = 1 << 53

// document is a strictly parsed values.yml.
type document struct {
	Envelope  bundle.RuntimePolicy
	Namespace map[string]any // JSON-compatible value of the audience namespace
	Settings  map[string]any // the flat settings properties ("server.httpsPort": 8443); nil when none
}

// parseValues parses values.yml strictly for audience: exactly one YAML
// document whose top level is the runtimePolicy envelope, the audience
// namespace and then the flat settings properties (every other key); another
// audience's namespace is an unknown field (it never belongs in this
// projection). No duplicate or non-string keys, no aliases or merge keys, no
// values without a JSON equivalent; every envelope field present with its
// type and no unknown one. schemaVersion is checked before the other envelope
// fields so that a future schema is reported as SCHEMA_UNSUPPORTED rather
// than as unknown fields.
func parseValues(b []byte, audience string) (*document, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, &VerificationError{Reason: ReasonParse, Field: "values.yml", Err: err}
	}
	// yaml.Unmarshal reads the first document only. A second one needs a
	// document marker at the start of a line; only then is the stream
	// decoded again, document by document.
	if bytes.HasPrefix(b, []byte("---")) || bytes.HasPrefix(b, []byte("...")) ||
		bytes.Contains(b, []byte("\n---")) || bytes.Contains(b, []byte("\n...")) {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		var first, extra yaml.Node
		if err := dec.Decode(&first); err != nil {
			return nil, &VerificationError{Reason: ReasonParse, Field: "values.yml", Err: err}
		}
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return nil, reject(ReasonParse, "values.yml", "more than one YAML document")
		}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		return nil, reject(ReasonParse, "values.yml", "top level is not a mapping")
	}
	top := root.Content[0]
	ns := bundle.Namespace(audience)
	var doc document
	var envNode, nsNode *yaml.Node
	seen := map[string]bool{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		key, err := mapKey(k, seen, "")
		if err != nil {
			return nil, err
		}
		switch key {
		case "runtimePolicy":
			envNode = v
		case ns:
			nsNode = v
		case "agentPolicy", "gatewayPolicy", "knowledgePolicy":
			return nil, reject(ReasonUnknownField, pos(k, key), "another audience's namespace in a %s artifact", audience)
		default:
			val, err := toJSON(v, key)
			if err != nil {
				return nil, err
			}
			if doc.Settings == nil {
				doc.Settings = map[string]any{}
			}
			doc.Settings[key] = val
		}
	}
	if envNode == nil {
		return nil, reject(ReasonMissingField, "values.yml:runtimePolicy", "envelope is missing")
	}
	if err := decodeEnvelope(envNode, &doc.Envelope); err != nil {
		return nil, err
	}
	if nsNode == nil {
		return nil, reject(ReasonMissingField, "values.yml:"+ns, "audience namespace is missing")
	}
	val, err := toJSON(nsNode, ns)
	if err != nil {
		return nil, err
	}
	m, ok := val.(map[string]any)
	if !ok {
		return nil, reject(ReasonInvalidField, pos(nsNode, ns), "want a mapping")
	}
	doc.Namespace = m
	return &doc, nil
}

// pos renders "values.yml:line:field".
func pos(n *yaml.Node, field string) string {
	return fmt.Sprintf("values.yml:%d:%s", n.Line, field)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapKey checks one mapping key: a plain string and, when seen is not nil,
// not seen before.
func mapKey(k *yaml.Node, seen map[string]bool, path string) (string, error) {
	if k.Kind == yaml.AliasNode {
		return "", reject(ReasonInvalidField, pos(k, path), "aliases are not allowed")
	}
	if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
		if k.ShortTag() == "!!merge" {
			return "", reject(ReasonInvalidField, pos(k, path), "merge keys are not allowed")
		}
		return "", reject(ReasonInvalidField, pos(k, path), "mapping key %q is not a string", k.Value)
	}
	if seen == nil {
		return k.Value, nil
	}
	if seen[k.Value] {
		return "", reject(ReasonDuplicateKey, pos(k, join(path, k.Value)), "key appears more than once")
	}
	seen[k.Value] = true
	return k.Value, nil
}

// toJSON converts a YAML node to a JSON-compatible Go value: map[string]any,
// []any, string, int64, float64, bool or nil.
func toJSON(n *yaml.Node, path string) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, err := mapKey(n.Content[i], nil, path)
			if err != nil {
				return nil, err
			}
			if _, dup := m[key]; dup {
				return nil, reject(ReasonDuplicateKey, pos(n.Content[i], join(path, key)), "key appears more than once")
			}
			v, err := toJSON(n.Content[i+1], join(path, key))
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, err := toJSON(c, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			s[i] = v
		}
		return s, nil
	case yaml.ScalarNode:
		return scalar(n, path)
	case yaml.AliasNode:
		return nil, reject(ReasonInvalidField, pos(n, path), "aliases are not allowed")
	}
	return nil, reject(ReasonInvalidField, pos(n, path), "unsupported YAML node")
}

func scalar(n *yaml.Node, path string) (any, error) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		// An unquoted RFC 3339 time resolves to !!timestamp; its JSON
		// equivalent is the string as written.
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, reject(ReasonInvalidField, pos(n, path), "not a boolean")
		}
		return b, nil
	case "!!int":
		i, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			if err := n.Decode(&i); err != nil {
				return nil, reject(ReasonInvalidField, pos(n, path), "integer out of range")
			}
		}
		if i > maxSafeInteger || i < -maxSafeInteger {
			return nil, reject(ReasonInvalidField, pos(n, path), "integer %d beyond ±2^53 has no JSON equivalent", i)
		}
		return i, nil
	case "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			if err := n.Decode(&f); err != nil {
				return nil, reject(ReasonInvalidField, pos(n, path), "not a number")
			}
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, reject(ReasonInvalidField, pos(n, path), "NaN and infinities have no JSON equivalent")
		}
		return f, nil
	}
	return nil, reject(ReasonInvalidField, pos(n, path), "tag %s has no JSON equivalent", n.ShortTag())
}
