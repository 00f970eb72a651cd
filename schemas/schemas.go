package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed common.json source/*.json artifact/*.json allowlist/*.json
var files embed.FS

// BaseURL is the $id prefix of every embedded schema.
const BaseURL = "https://configpub.dev/schemas/"

// ErrInvalid is wrapped by every *ValidationError.
var ErrInvalid = errors.New("schema validation failed")

// MaxProblems bounds the problems a ValidationError lists.
const MaxProblems = 20

// Problem is one violation at an instance location.
type Problem struct {
	Path    []string // instance location, one segment per member name or item index
	Message string
}

// Pointer returns the problem's location as a JSON pointer.
func (p Problem) Pointer() string {
	if len(p.Path) == 0 {
		return ""
	}
	var b strings.Builder
	for _, s := range p.Path {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// ValidationError lists the problems of one document, sorted by location and
// bounded by MaxProblems (Omitted counts the rest).
type ValidationError struct {
	Schema   string
	Problems []Problem
	Omitted  int
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: ", e.Schema)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", orRoot(p.Pointer()), p.Message)
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "; and %d more", e.Omitted)
	}
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// Set is the compiled, immutable set of embedded schemas. It is safe for
// concurrent use.
type Set struct {
	schemas map[string]*jsonschema.Schema
	flat    map[string]any // the inlined documents, for suggestions
}

var defaultSet = sync.OnceValues(compile)

// Default returns the compiled embedded schemas (compiled once per process).
func Default() (*Set, error) { return defaultSet() }

func compile() (*Set, error) {
	docs := map[string]any{}
	var names []string
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".json" || strings.HasPrefix(p, "allowlist/") {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("schema %s: %w", p, err)
		}
		docs[BaseURL+p] = doc
		if p != "common.json" {
			names = append(names, strings.TrimSuffix(p, ".json"))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	flats := map[string]any{}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseRegexpEngine(regexpEngine)
	for _, n := range names {
		u := BaseURL + n + ".json"
		flat, err := inlineRefs(docs[u], u, docs, 0)
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", n, err)
		}
		if err := c.AddResource(u, flat); err != nil {
			return nil, fmt.Errorf("schema %s: %w", n, err)
		}
		flats[n] = flat
	}
	s := &Set{schemas: map[string]*jsonschema.Schema{}, flat: flats}
	for _, n := range names {
		sch, err := c.Compile(BaseURL + n + ".json")
		if err != nil {
			return nil, fmt.Errorf("compile schema %s: %w", n, err)
		}
		s.schemas[n] = sch
	}
	return s, nil
}

// Names returns the schema names ("source/agent", "artifact/gateway", …).
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.schemas))
	for n := range s.schemas {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Validate checks doc (a value as produced by encoding/json with UseNumber,
// or by render.Value.ToAny) against the named schema.
func (s *Set) Validate(name string, doc any) error {
	sch, ok := s.schemas[name]
	if !ok {
		return fmt.Errorf("unknown schema %q", name)
	}
	err := sch.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("validate %s: %w", name, err)
	}
	var probs []Problem
	collect(ve, doc, nil, &probs)
	probs = expandMissing(sch, probs)
	s.suggestFields(name, probs)
	sort.SliceStable(probs, func(i, j int) bool { return probs[i].Pointer() < probs[j].Pointer() })
	probs = dedupe(probs)
	out := &ValidationError{Schema: name}
	if len(probs) > MaxProblems {
		out.Omitted = len(probs) - MaxProblems
		probs = probs[:MaxProblems]
	}
	out.Problems = probs
	return out
}

var printer = message.NewPrinter(language.English)

// collect flattens the leaves of a validation error tree. A missing-property
// leaf becomes one problem per missing name, located at that name; an
// additional-property leaf one per unknown name; a key that fails a
// propertyNames schema one problem at the key. within is the location of
// the nearest enclosing error whose location can be trusted.
func collect(ve *jsonschema.ValidationError, doc any, within []string, out *[]Problem) {
	if k, ok := ve.ErrorKind.(*kind.PropertyNames); ok {
		collectKey(ve, doc, within, k.Property, out)
		return
	}
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, doc, ve.InstanceLocation, out)
		}
		return
	}
	loc := append([]string(nil), ve.InstanceLocation...)
	switch k := ve.ErrorKind.(type) {
	case *kindRequired:
		for _, m := range k.Missing {
			*out = append(*out, Problem{Path: append(loc[:len(loc):len(loc)], m), Message: msgMissing})
		}
	case *kindAdditional:
		for _, p := range k.Properties {
			*out = append(*out, Problem{Path: append(loc[:len(loc):len(loc)], p), Message: msgUnknownField})
		}
	default:
		*out = append(*out, Problem{Path: loc, Message: redactedMessage(ve.ErrorKind)})
	}
}

// collectKey flattens a propertyNames violation into a problem at the key's
// own path, saying that it is the key that fails: its causes are located
// relative to the key (their whole instance), which put them at the
// document. The violation's own location cannot be used as it is:
// jsonschema/v6 (v6.0.3) stores it without copying the validator's location
// slice, which the validation of later siblings then overwrites; only its
// length holds. So the key is looked for in doc, at that depth below within
// (the location of an enclosing error, which is copied).
func collectKey(ve *jsonschema.ValidationError, doc any, within []string, key string, out *[]Problem) {
	var msgs []string
	var leaves func(c *jsonschema.ValidationError)
	leaves = func(c *jsonschema.ValidationError) {
		if len(c.Causes) > 0 {
			for _, cc := range c.Causes {
				leaves(cc)
			}
			return
		}
		msgs = append(msgs, keyMessage(c.ErrorKind))
	}
	for _, c := range ve.Causes {
		leaves(c)
	}
	if len(msgs) == 0 {
		msgs = append(msgs, "invalid key")
	}
	depth := len(ve.InstanceLocation)
	if len(within) > depth {
		within = nil
	}
	for _, at := range membersNamed(doc, within, depth, key) {
		for _, m := range msgs {
			*out = append(*out, Problem{Path: append(at, key), Message: m})
		}
	}
}

// membersNamed returns the locations, depth segments long and starting
// with prefix, of the maps in doc that have a member named key.
func membersNamed(doc any, prefix []string, depth int, key string) [][]string {
	var out [][]string
	var walk func(v any, loc []string)
	walk = func(v any, loc []string) {
		if len(loc) < len(prefix) {
			seg := prefix[len(loc)]
			switch v := v.(type) {
			case map[string]any:
				if c, ok := v[seg]; ok {
					walk(c, append(loc, seg))
				}
			case []any:
				if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(v) {
					walk(v[i], append(loc, seg))
				}
			}
			return
		}
		if len(loc) == depth {
			if m, ok := v.(map[string]any); ok {
				if _, ok := m[key]; ok {
					out = append(out, slices.Clone(loc))
				}
			}
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				walk(c, append(loc[:len(loc):len(loc)], k))
			}
		case []any:
			for i, c := range v {
				walk(c, append(loc[:len(loc):len(loc)], strconv.Itoa(i)))
			}
		}
	}
	walk(doc, nil)
	return out
}

// keyMessage describes a key that fails its propertyNames schema. The key
// is in the problem's path, so the message does not repeat it.
func keyMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("key does not match pattern %q", k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("key must have at least %d characters", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("key must have at most %d characters", k.Want)
	}
	return "invalid key: " + k.LocalizedString(printer)
}

// redactedMessage describes a violation without the offending value: a value that
// fails a pattern or format may be a credential (a key pasted where a
// reference belongs), so only the rule is named.
func redactedMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("value does not match pattern %q (the value is not shown)", k.Want)
	case *kind.Format:
		return fmt.Sprintf("value is not a valid %s (the value is not shown)", k.Want)
	case *kind.ContentEncoding:
		return fmt.Sprintf("value is not %s encoded (the value is not shown)", k.Want)
	case *kind.ContentMediaType:
		return fmt.Sprintf("value is not of media type %s (the value is not shown)", k.Want)
	}
	return k.LocalizedString(printer)
}

func dedupe(ps []Problem) []Problem {
	out := ps[:0]
	for i, p := range ps {
		if i > 0 && p.Pointer() == ps[i-1].Pointer() && p.Message == ps[i-1].Message {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Allowlist is the projection allowlist of one audience.
type Allowlist struct {
	Audience  string   `json:"audience"`
	Namespace string   `json:"namespace"`
	Allow     []string `json:"allow"`     // JSON-pointer patterns copied from the effective policy
	Forbidden []string `json:"forbidden"` // member names that must never appear in the namespace
}

// LoadAllowlist returns the embedded allowlist of an audience.
func LoadAllowlist(audience string) (*Allowlist, error) {
	b, err := files.ReadFile("allowlist/" + audience + ".json")
	if err != nil {
		return nil, fmt.Errorf("allowlist for audience %q: %w", audience, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var a Allowlist
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("allowlist for audience %q: %w", audience, err)
	}
	return &a, nil
}

// Raw returns the embedded bytes of a schema or allowlist by file path
// (e.g. "artifact/agent.json").
func Raw(p string) ([]byte, error) { return files.ReadFile(p) }
