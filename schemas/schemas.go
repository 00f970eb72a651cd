package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
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
	collect(ve, &probs)
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
// additional-property leaf one per unknown name.
func collect(ve *jsonschema.ValidationError, out *[]Problem) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out)
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

// redactedMessage describes a violation without the offending value: a value that
// fails a pattern or format may be a credential (a key pasted where a
// reference belongs), so only the rule is named.
func redactedMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("value does not match pattern %q (the value is not shown)", k.Want)
	case *kind.Format:
		return fmt.Sprintf("value is not a valid %s (the value is not shown)", k.Want)
	case *kind.PropertyNames:
		return "invalid member name (the name is not shown)"
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
