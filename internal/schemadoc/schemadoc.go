// Package schemadoc renders the field reference of the policy source kinds
// and of the runtimePolicy envelope as Markdown, from the embedded JSON
// Schemas and their descriptions. docs/reference.md is its output, checked
// by a golden test, so the reference cannot drift from the schemas.
package schemadoc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/configpub/configpub/schemas"
)

// Kinds lists the source kinds in the order the reference documents them,
// with their schema file.
var Kinds = []struct{ Kind, File string }{
	{"Repository", "source/repository.json"},
	{"Environment", "source/environment.json"},
	{"Host", "source/host.json"},
	{"Agent", "source/agent.json"},
	{"ModelAlias", "source/modelalias.json"},
	{"Gateway", "source/gateway.json"},
	{"Tool", "source/tool.json"},
	{"Skill", "source/skill.json"},
	{"KnowledgeBase", "source/knowledgebase.json"},
	{"Workflow", "source/workflow.json"},
	{"Target", "source/target.json"},
}

const commonPrefix = schemas.BaseURL + "common.json#/$defs/"

// node is the subset of a JSON Schema the reference reads.
type node struct {
	Ref         string           `json:"$ref"`
	Title       string           `json:"title"`
	Description string           `json:"description"`
	Type        string           `json:"type"`
	Const       any              `json:"const"`
	Enum        []any            `json:"enum"`
	Pattern     string           `json:"pattern"`
	Minimum     *json.Number     `json:"minimum"`
	Maximum     *json.Number     `json:"maximum"`
	MinLength   *int             `json:"minLength"`
	MaxLength   *int             `json:"maxLength"`
	MinItems    *int             `json:"minItems"`
	Properties  map[string]*node `json:"properties"`
	Required    []string         `json:"required"`
	Items       *node            `json:"items"`
	AllOf       []*node          `json:"allOf"`
	OneOf       []*node          `json:"oneOf"`
	Additional  json.RawMessage  `json:"additionalProperties"`
	Defs        map[string]*node `json:"$defs"`
	order       []string         // property names in document order
	addl        *node            // additionalProperties when it is a schema
}

// parse decodes a schema keeping the document order of every properties map.
func parse(b []byte) (*node, error) {
	var n node
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	if err := fillOrder(&n, b); err != nil {
		return nil, err
	}
	return &n, nil
}

// fillOrder records the member order of "properties" objects, which
// encoding/json's maps lose.
func fillOrder(n *node, raw []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil // not an object: nothing to order
	}
	if p, ok := m["properties"]; ok {
		keys, err := objectKeys(p)
		if err != nil {
			return err
		}
		n.order = keys
		var sub map[string]json.RawMessage
		if err := json.Unmarshal(p, &sub); err != nil {
			return err
		}
		for _, k := range keys {
			if err := fillOrder(n.Properties[k], sub[k]); err != nil {
				return err
			}
		}
	}
	if it, ok := m["items"]; ok && n.Items != nil {
		if err := fillOrder(n.Items, it); err != nil {
			return err
		}
	}
	for _, kw := range []string{"allOf", "oneOf"} {
		if arr, ok := m[kw]; ok {
			var raws []json.RawMessage
			if err := json.Unmarshal(arr, &raws); err != nil {
				return err
			}
			list := n.AllOf
			if kw == "oneOf" {
				list = n.OneOf
			}
			for i, r := range raws {
				if err := fillOrder(list[i], r); err != nil {
					return err
				}
			}
		}
	}
	if len(n.Additional) > 0 && n.Additional[0] == '{' {
		a, err := parse(n.Additional)
		if err != nil {
			return err
		}
		n.addl = a
	}
	if defs, ok := m["$defs"]; ok {
		var sub map[string]json.RawMessage
		if err := json.Unmarshal(defs, &sub); err != nil {
			return err
		}
		for k, r := range sub {
			if err := fillOrder(n.Defs[k], r); err != nil {
				return err
			}
		}
	}
	return nil
}

func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// additional returns the schema of additionalProperties when it is one.
func (n *node) additional() *node { return n.addl }

// generator holds the shared definitions while rendering.
type generator struct {
	defs map[string]*node
	buf  bytes.Buffer
}

// Markdown renders the complete reference.
func Markdown() ([]byte, error) {
	raw, err := schemas.Raw("common.json")
	if err != nil {
		return nil, err
	}
	common, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("common.json: %w", err)
	}
	g := &generator{defs: common.Defs}
	w := &g.buf
	w.WriteString("<!-- Generated from schemas/*.json by internal/schemadoc; do not edit.\n     Regenerate with: go test ./docs -run TestReference -update -->\n\n")
	w.WriteString("# Field reference\n\n")
	w.WriteString("Every policy source document has the same four top-level fields: `apiVersion`\n(always `configpub.dev/v1`), `kind`, `metadata` and `spec`. Unknown fields are\nerrors. A field marked *yes* is required; an optional field that is omitted\nnever widens authority (an omitted grant list compiles to an empty list).\nTypes in *italics* are shared types, defined at the end.\n\n")
	for _, k := range Kinds {
		fmt.Fprintf(w, "- [%s](#%s)\n", k.Kind, strings.ToLower(k.Kind))
	}
	w.WriteString("- [runtimePolicy envelope](#runtimepolicy-envelope)\n- [Shared types](#shared-types)\n\n")
	for _, k := range Kinds {
		if err := g.kind(k.Kind, k.File); err != nil {
			return nil, err
		}
	}
	if err := g.envelope(); err != nil {
		return nil, err
	}
	g.shared()
	return g.buf.Bytes(), nil
}

func (g *generator) kind(kind, file string) error {
	raw, err := schemas.Raw(file)
	if err != nil {
		return err
	}
	n, err := parse(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	w := &g.buf
	fmt.Fprintf(w, "## %s\n\n%s\n\nSchema: `schemas/%s`.\n\n", kind, n.Description, file)
	if len(n.Properties["spec"].OneOf) > 0 {
		var alts []string
		for _, o := range n.Properties["spec"].OneOf {
			alts = append(alts, "`spec."+strings.Join(o.Required, "`, `spec.")+"`")
		}
		fmt.Fprintf(w, "Exactly one of %s.\n\n", strings.Join(alts, " or "))
	}
	w.WriteString("| field | type | required | description |\n|---|---|---|---|\n")
	if err := g.fields("", n); err != nil {
		return err
	}
	w.WriteString("\n")
	return nil
}

// fields writes one row per property of n, depth first.
func (g *generator) fields(prefix string, n *node) error {
	n, err := g.merged(n)
	if err != nil {
		return err
	}
	req := map[string]bool{}
	for _, r := range n.Required {
		req[r] = true
	}
	for _, name := range n.order {
		p, err := g.merged(n.Properties[name])
		if err != nil {
			return err
		}
		path := prefix + name
		r := ""
		if req[name] {
			r = "yes"
		}
		fmt.Fprintf(&g.buf, "| `%s` | %s | %s | %s |\n", path, g.typeOf(n.Properties[name], p), r, cell(p.Description))
		switch {
		case len(p.Properties) > 0:
			if err := g.fields(path+".", p); err != nil {
				return err
			}
		case p.Items != nil:
			it, err := g.merged(p.Items)
			if err != nil {
				return err
			}
			if len(it.Properties) > 0 {
				if err := g.fields(path+"[].", it); err != nil {
					return err
				}
			}
		case p.additional() != nil && len(p.additional().Properties) > 0:
			a := p.additional()
			fmt.Fprintf(&g.buf, "| `%s.NAME` | object |  | %s |\n", path, cell(a.Description))
			if err := g.fields(path+".NAME.", a); err != nil {
				return err
			}
		}
	}
	return nil
}

// merged resolves a shared-definition reference and folds allOf branches
// into one node; the referring node's own description wins.
func (g *generator) merged(n *node) (*node, error) {
	out := *n
	if n.Ref != "" {
		d, err := g.def(n.Ref)
		if err != nil {
			return nil, err
		}
		out = *d
		out.Ref = n.Ref
		if n.Description != "" {
			out.Description = n.Description
		}
	}
	if len(n.AllOf) > 0 {
		out.AllOf = nil
		for _, b := range n.AllOf {
			m, err := g.merged(b)
			if err != nil {
				return nil, err
			}
			if out.Description == "" {
				out.Description = m.Description
			}
			if out.Type == "" {
				out.Type = m.Type
			}
			out.Required = append(out.Required, m.Required...)
			if out.Properties == nil {
				out.Properties = map[string]*node{}
			}
			for _, k := range m.order {
				prev, seen := out.Properties[k]
				v := m.Properties[k]
				if seen && v.Description == "" {
					c := *v
					pm, err := g.merged(prev)
					if err != nil {
						return nil, err
					}
					c.Description = pm.Description
					v = &c
				}
				if !seen {
					out.order = append(out.order, k)
				}
				out.Properties[k] = v
			}
		}
	}
	return &out, nil
}

func (g *generator) def(ref string) (*node, error) {
	name, ok := sharedName(ref)
	if !ok {
		return nil, fmt.Errorf("reference %s: only shared definitions are documented", ref)
	}
	d := g.defs[name]
	if d == nil {
		return nil, fmt.Errorf("reference %s: no such definition", ref)
	}
	return d, nil
}

// sharedName returns the definition name of a reference into common.json,
// absolute or (inside common.json) relative.
func sharedName(ref string) (string, bool) {
	if name, ok := strings.CutPrefix(ref, commonPrefix); ok {
		return name, true
	}
	return strings.CutPrefix(ref, "#/$defs/")
}

// typeOf describes a property's type; orig is the node as written (its
// $ref names a shared type), p the resolved one.
func (g *generator) typeOf(orig, p *node) string {
	if name, ok := sharedName(orig.Ref); ok && name != "metadata" {
		return "[*" + name + "*](#" + strings.ToLower(name) + ")"
	}
	switch {
	case p.Const != nil:
		return "`" + fmt.Sprint(p.Const) + "`"
	case len(p.Enum) > 0:
		var vs []string
		for _, v := range p.Enum {
			vs = append(vs, "`"+fmt.Sprint(v)+"`")
		}
		return "one of " + strings.Join(vs, ", ")
	case p.Type == "array" && p.Items != nil:
		it, err := g.merged(p.Items)
		if err == nil && len(it.Properties) > 0 {
			return "list of objects"
		}
		return "list of " + g.typeOf(p.Items, it)
	case p.Type == "object" && p.additional() != nil && len(p.additional().Properties) > 0:
		return "map of name to object"
	case p.Type == "number" && p.Minimum != nil && p.Maximum != nil:
		return fmt.Sprintf("number, %s to %s", p.Minimum, p.Maximum)
	case p.Type != "":
		return p.Type
	}
	return "object"
}

func (g *generator) envelope() error {
	raw, err := schemas.Raw("artifact/envelope.json")
	if err != nil {
		return err
	}
	n, err := parse(raw)
	if err != nil {
		return fmt.Errorf("artifact/envelope.json: %w", err)
	}
	w := &g.buf
	fmt.Fprintf(w, "## runtimePolicy envelope\n\n%s\n\nSchema: `schemas/artifact/envelope.json`. Every member is required.\n\n", n.Description)
	w.WriteString("| member | type | description |\n|---|---|---|\n")
	for _, name := range n.order {
		orig := n.Properties[name]
		p, err := g.merged(orig)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", name, g.typeOf(orig, p), cell(p.Description))
	}
	w.WriteString("\n")
	return nil
}

func (g *generator) shared() {
	w := &g.buf
	w.WriteString("## Shared types\n\n| type | meaning | JSON Schema |\n|---|---|---|\n")
	names := make([]string, 0, len(g.defs))
	for k := range g.defs {
		if k != "metadata" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		d := g.defs[k]
		fmt.Fprintf(w, "| <a id=\"%s\"></a>*%s* | %s | %s |\n", strings.ToLower(k), k, cell(d.Description), g.constraint(d))
	}
}

// constraint summarises a shared type's validation keywords.
func (g *generator) constraint(d *node) string {
	var parts []string
	if d.Type != "" {
		parts = append(parts, d.Type)
	}
	if d.Pattern != "" {
		parts = append(parts, "pattern `"+strings.ReplaceAll(d.Pattern, "|", `\|`)+"`")
	}
	if len(d.Enum) > 0 {
		var vs []string
		for _, v := range d.Enum {
			vs = append(vs, "`"+fmt.Sprint(v)+"`")
		}
		parts = append(parts, "one of "+strings.Join(vs, ", "))
	}
	if d.Minimum != nil {
		parts = append(parts, "minimum "+d.Minimum.String())
	}
	if d.MinLength != nil {
		parts = append(parts, fmt.Sprintf("minLength %d", *d.MinLength))
	}
	if d.Items != nil {
		if name, ok := sharedName(d.Items.Ref); ok {
			parts = append(parts, "items *"+name+"*")
		}
	}
	return strings.Join(parts, ", ")
}

// cell makes text safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}
