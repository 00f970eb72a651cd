package compiler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/configpub/configpub/internal/intern"
	"github.com/configpub/configpub/internal/parallel"
	"github.com/configpub/configpub/internal/policytree"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
	"github.com/configpub/configpub/schemas"
)

// Source kinds.
const (
	KindRepository    = "Repository"
	KindEnvironment   = "Environment"
	KindHost          = "Host"
	KindAgent         = "Agent"
	KindGateway       = "Gateway"
	KindKnowledgeBase = "KnowledgeBase"
	KindTool          = "Tool"
	KindSkill         = "Skill"
	KindModelAlias    = "ModelAlias"
	KindWorkflow      = "Workflow"
	KindTarget        = "Target"
)

// APIVersion is the apiVersion of every source document.
const APIVersion = "configpub.dev/v1"

// RepositoryFile is the path of the Repository document.
const RepositoryFile = "configpub.yaml"

// ReleasesDir holds the release manifests; it is not a source directory.
const ReleasesDir = "releases"

var kindSchemas = map[string]string{
	KindRepository: "source/repository", KindEnvironment: "source/environment", KindHost: "source/host",
	KindAgent: "source/agent", KindGateway: "source/gateway", KindKnowledgeBase: "source/knowledgebase",
	KindTool: "source/tool", KindSkill: "source/skill", KindModelAlias: "source/modelalias",
	KindWorkflow: "source/workflow", KindTarget: "source/target",
}

// source is one loaded document. Its parsed tree is dropped once decoded
// (release); errorf re-reads and re-parses the file to locate a field, so a
// large repository does not keep every YAML node alive.
type source struct {
	Kind, Name string
	File       string
	Digest     string // sha256 of the file bytes
	fsys       fs.FS
	index      *sources        // every document, for did-you-mean suggestions
	Doc        *yamlstrict.Doc // from parsing until the document is decoded
	// spec is the decoded spec (the T of a doc[T] of the document's kind),
	// decoded as soon as the document is checked, so loading a large
	// repository holds decoded specs only.
	spec any
}

// errorf returns a *SourceError at a path inside the document.
func (s *source) errorf(path []string, format string, args ...any) error {
	doc, err := s.reread(path)
	if err != nil {
		return err
	}
	e := doc.Errorf(path, format, args...)
	return &SourceError{File: e.File, Line: e.Line, Field: e.Field, Err: errors.New(e.Msg)}
}

// reread returns the parsed document, parsing the file again once it was
// let go (release); path is what the caller means to locate.
func (s *source) reread(path []string) (*yamlstrict.Doc, error) {
	if s.Doc != nil {
		return s.Doc, nil
	}
	b, err := fs.ReadFile(s.fsys, s.File)
	if err != nil {
		return nil, fmt.Errorf("%s: re-read to locate %s: %w", s.File, yamlstrict.FieldPath(path), err)
	}
	d, err := yamlstrict.ParseSource(s.File, LF(b))
	if err != nil {
		return nil, fromStrict(err)
	}
	return d, nil
}

// LF returns b with its CRLF line endings as LF ones (b itself when it has
// none): what configpub reads and digests of a source or release file, so
// that a checkout with CRLF line endings (Git for Windows' core.autocrlf)
// reads as the LF bytes Git stores. YAML reads a line break either way,
// and a release file never holds a carriage return of its own (its
// strings escape one).
func LF(b []byte) []byte {
	if !bytes.Contains(b, []byte("\r\n")) {
		return b
	}
	return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
}

// line returns the line of the field at path (or of its nearest existing
// ancestor), 0 when the file cannot be read again: for a message that
// names a second place in a document.
func (s *source) line(path []string) int {
	doc, err := s.reread(path)
	if err != nil {
		return 0
	}
	return doc.Line(path...)
}

// release drops the parsed tree.
func (s *source) release() { s.Doc = nil }

// sources indexes every document of a policy repository by kind and name.
type sources struct {
	byKind map[string]map[string]*source
	// sorted holds the sorted names of a kind once asked for (names), and
	// of every kind once the documents are let go (letGo).
	sorted map[string][]string
	// digest is the SHA-256 over every document's path and digest, in path
	// order: two loads of the same tree have the same digest.
	digest [sha256.Size]byte
	// ignored lists the *.yaml and *.yml files and the directories
	// ("local/") Git ignores, left out.
	ignored []string
}

func (ss *sources) get(kind, name string) *source { return ss.byKind[kind][name] }

// letGo drops the index of the documents, keeping the sorted names of every
// kind (did-you-mean suggestions need nothing else), so that a document is
// freed as soon as the model no longer holds it. Afterwards names only
// reads, so it is safe for concurrent use.
func (ss *sources) letGo() {
	for k := range ss.byKind {
		ss.names(k)
	}
	ss.byKind = nil
}

// names returns the sorted names of a kind, sorting them once; the caller
// must not modify the list.
func (ss *sources) names(kind string) []string {
	if out, ok := ss.sorted[kind]; ok || ss.byKind == nil {
		return out
	}
	out := make([]string, 0, len(ss.byKind[kind]))
	for n := range ss.byKind[kind] {
		out = append(out, n)
	}
	sort.Strings(out)
	if ss.sorted == nil {
		ss.sorted = map[string][]string{}
	}
	ss.sorted[kind] = out
	return out
}

// loadSources reads every *.yaml/*.yml file of fsys except hidden paths, the
// releases directory and what ignored reports (nil: nothing), strictly. A
// cancelled ctx stops it between files.
func loadSources(ctx context.Context, fsys fs.FS, set *schemas.Set, ignored func(p string, isDir bool) bool) (*sources, error) {
	ss := &sources{byKind: map[string]map[string]*source{}}
	// Hidden entries, the releases directory and what Git ignores are not
	// sources; any other symbolic link or special file is refused by the
	// tree reader.
	var paths []string
	var miscased []error // agents/x.YAML: refused, not silently left out
	err := policytree.Walk(fsys, func(p string, d fs.DirEntry) bool {
		if strings.HasPrefix(path.Base(p), ".") || (p == ReleasesDir && d.IsDir()) {
			return true
		}
		if ignored == nil || (d.Type().IsRegular() && !isYAML(p)) || !ignored(p, d.IsDir()) {
			return false
		}
		switch {
		case d.IsDir():
			ss.ignored = append(ss.ignored, p+"/")
		case d.Type().IsRegular():
			ss.ignored = append(ss.ignored, p)
		}
		return true
	}, func(p string) error {
		if isYAML(p) {
			paths = append(paths, p)
		} else if ext := path.Ext(p); strings.EqualFold(ext, ".yaml") || strings.EqualFold(ext, ".yml") {
			miscased = append(miscased, &SourceError{File: p, Line: 1, Err: fmt.Errorf("extension %s is not compiled: a source file ends in .yaml or .yml, in lower case; rename it (or move it under a hidden directory if it is not a source)", ext)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := nestedRepository(fsys, paths); err != nil {
		return nil, err
	}
	// Parse in parallel, index in path order.
	// Every file is checked, so one run reports every broken file.
	parsed := make([]*source, len(paths))
	errs := make([]error, len(paths))
	var plain render.AnyBufferPool // for schema validation
	err = parallel.Do(len(paths), func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := fs.ReadFile(fsys, paths[i])
		if err != nil {
			errs[i] = fmt.Errorf("read %s: %w", paths[i], err)
			return nil
		}
		buf := plain.Get()
		src, err := parseSource(paths[i], b, set, buf)
		plain.Put(buf)
		if err != nil {
			errs[i] = err
			return nil
		}
		src.fsys = fsys
		src.index = ss
		if err := src.decodeSpec(); err != nil {
			errs[i] = err
			return nil
		}
		parsed[i] = src
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := joinSourceErrors(append(miscased, errs...)); err != nil {
		return nil, err
	}
	sum := sha256.New()
	for _, src := range parsed {
		sum.Write([]byte(src.File + "\x00" + src.Digest + "\n"))
		if ss.byKind[src.Kind] == nil {
			ss.byKind[src.Kind] = map[string]*source{}
		}
		if prev, dup := ss.byKind[src.Kind][src.Name]; dup {
			return nil, src.errorf([]string{"metadata", "name"}, "%s %q is already defined in %s", src.Kind, src.Name, prev.File)
		}
		ss.byKind[src.Kind][src.Name] = src
	}
	sum.Sum(ss.digest[:0])
	repos := ss.byKind[KindRepository]
	if len(repos) == 0 {
		if _, err := fs.Stat(fsys, RepositoryFile); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no %s: the directory compiled must be the policy repository's root (configpub init writes one)", ErrInvalidSource, RepositoryFile)
		}
	}
	if len(repos) != 1 {
		return nil, &SourceError{File: RepositoryFile, Line: 1, Err: fmt.Errorf("want exactly one Repository document, found %d", len(repos))}
	}
	for _, r := range repos {
		if r.File != RepositoryFile {
			return nil, &SourceError{File: r.File, Line: 1, Field: "kind", Err: fmt.Errorf("the Repository document must be %s", RepositoryFile)}
		}
	}
	return ss, nil
}

// nestedRepository returns a *NestedRepositoryError when the walk found no
// configpub.yaml at fsys's root (paths, the source paths, lack it) but one
// in a subdirectory: its releases/ would otherwise be read
// as sources ("unknown kind Release"), and the message would not say that
// the policy directory is one level down.
func nestedRepository(fsys fs.FS, paths []string) error {
	var dirs []string
	for _, p := range paths {
		if p == RepositoryFile {
			return nil // the root is a policy repository
		}
		if path.Base(p) == RepositoryFile {
			dirs = append(dirs, path.Dir(p))
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	slices.SortStableFunc(dirs, func(a, b string) int {
		return strings.Count(a, "/") - strings.Count(b, "/")
	})
	st, err := fs.Stat(fsys, path.Join(dirs[0], ReleasesDir))
	return &NestedRepositoryError{Dirs: dirs, Releases: err == nil && st.IsDir()}
}

// isYAML: p is named like a source document.
func isYAML(p string) bool { return path.Ext(p) == ".yaml" || path.Ext(p) == ".yml" }

// parseSource parses, schema-checks and secret-checks one document.
// kindName is what an unknown kind must look like to be shown in an error.
var kindName = regexp.MustCompile(`^[A-Z][A-Za-z]{0,39}$`)

// kindList names the kinds of source documents, sorted.
func kindList() string {
	ks := make([]string, 0, len(kindSchemas))
	for k := range kindSchemas {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

// buf holds the document's plain form while the schema checks it.
func parseSource(file string, b []byte, set *schemas.Set, buf *render.AnyBuffer) (*source, error) {
	b = LF(b)
	doc, err := yamlstrict.ParseSource(file, b)
	if err != nil {
		return nil, fromStrict(err)
	}
	src := &source{File: file, Digest: render.BytesDigest(b), Doc: doc}
	if doc.Value.Kind != render.KindMap {
		return nil, src.errorf(nil, "a source document must be a map")
	}
	if v := doc.Value.Get("apiVersion"); v == nil || v.Kind != render.KindString || v.Str != APIVersion {
		return nil, src.errorf([]string{"apiVersion"}, "apiVersion must be %q", APIVersion)
	}
	kv := doc.Value.Get("kind")
	if kv == nil || kv.Kind != render.KindString {
		return nil, src.errorf([]string{"kind"}, "kind is required")
	}
	schemaName, ok := kindSchemas[kv.Str]
	if !ok {
		// Checked before the secret scan: the value is shown only when
		// it reads as a kind name (a pasted token would reach CI logs).
		if !kindName.MatchString(kv.Str) {
			return nil, src.errorf([]string{"kind"}, "unknown kind (the value is not a kind name and is not shown; kinds: %s)", kindList())
		}
		return nil, src.errorf([]string{"kind"}, "unknown kind %q (kinds: %s)", kv.Str, kindList())
	}
	src.Kind = kv.Str
	// Secrets first: a schema message may quote a value. A credential-named
	// member the schema does not have is reported as the unknown field it
	// is (that message quotes no value).
	unknown := func(at []string) (string, bool) {
		var ve *schemas.ValidationError
		if err := set.Validate(schemaName, buf.ToAny(doc.Value)); errors.As(err, &ve) {
			for _, p := range ve.Problems {
				if slices.Equal(p.Path, at) && schemas.IsUnknownField(p.Message) {
					return p.Message, true
				}
			}
		}
		return "", false
	}
	if err := checkSecrets(src, doc.Value, nil, unknown); err != nil {
		return nil, err
	}
	if err := set.Validate(schemaName, buf.ToAny(doc.Value)); err != nil {
		var ve *schemas.ValidationError
		if errors.As(err, &ve) && len(ve.Problems) > 0 {
			all := make([]error, len(ve.Problems))
			for i, p := range ve.Problems {
				all[i] = src.errorf(p.Path, "%s", p.Message)
			}
			if ve.Omitted > 0 {
				return nil, &SourceErrors{Errs: all, Omitted: ve.Omitted}
			}
			return nil, joinSourceErrors(all)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	src.Name = doc.Value.Get("metadata").Get("name").Str
	if err := checkNamesNFC(src, doc.Value); err != nil {
		return nil, err
	}
	return src, nil
}

// identityStrings are the free-form strings of each kind, beyond
// metadata.name, that name something matched by its exact bytes: a Target's
// subject, the aud values and claims a Gateway accepts, the scopes an Agent
// delegates, the roles that approve a workflow run, a freeze window's name.
// "*" stands for every item of a list.
var identityStrings = map[string][][]string{
	KindTarget:      {{"spec", "subject", "name"}},
	KindGateway:     {{"spec", "issuers", "*", "audiences", "*"}, {"spec", "issuers", "*", "requiredClaims", "*"}},
	KindAgent:       {{"spec", "gateway", "delegation", "scopes", "*"}},
	KindWorkflow:    {{"spec", "versions", "*", "approvals", "*"}},
	KindEnvironment: {{"spec", "freezeWindows", "*", "name"}},
}

// checkNamesNFC refuses a metadata.name, or an identity string of the
// kind (identityStrings), that is not in Unicode NFC: "café" typed as one
// character and as "e" plus a combining accent look alike, but are two
// names: two Target documents that display the same, a Gateway audience no
// token's aud matches. Most names are ASCII by their schema pattern; this
// covers those that are not (a Target's or the Repository's name, free-form
// strings). The document is schema-checked, so the paths have their types.
func checkNamesNFC(src *source, v *render.Value) error {
	paths := append([][]string{{"metadata", "name"}}, identityStrings[src.Kind]...)
	for _, pat := range paths {
		if err := walkStrings(v, pat, nil, func(at []string, s string) error {
			if norm.NFC.IsNormalString(s) {
				return nil
			}
			return src.errorf(at, "%+q is not in Unicode NFC (composed) form; write %+q: the two look alike, but are different names", s, norm.NFC.String(s))
		}); err != nil {
			return err
		}
	}
	return nil
}

// walkStrings calls f with the path and value of every string in v at the
// path pattern pat ("*": every item of a list).
func walkStrings(v *render.Value, pat, at []string, f func(at []string, s string) error) error {
	if v == nil {
		return nil
	}
	if len(pat) == 0 {
		if v.Kind == render.KindString {
			return f(at, v.Str)
		}
		return nil
	}
	if pat[0] == "*" {
		if v.Kind != render.KindList {
			return nil
		}
		for i, it := range v.Items {
			if err := walkStrings(it, pat[1:], append(at[:len(at):len(at)], fmt.Sprintf("[%d]", i)), f); err != nil {
				return err
			}
		}
		return nil
	}
	return walkStrings(v.Get(pat[0]), pat[1:], append(at[:len(at):len(at)], pat[0]), f)
}

// decode decodes a schema-checked document into v (a *doc[T]) and drops
// the parsed tree: the decoded spec is all a compile keeps.
func (s *source) decode(v any) error {
	if err := render.Decode(s.Doc.Value, v); err != nil {
		// At the member refused (an integer field's 1e+300), not the
		// document's first line.
		var de *render.DecodeError
		if errors.As(err, &de) && len(de.Path) > 0 {
			return s.errorf(de.Path, "%s", de.Msg)
		}
		return s.errorf(nil, "decode: %v", err)
	}
	s.release()
	return nil
}

// decodeSpec decodes the document into the spec type of its kind.
func (s *source) decodeSpec() error {
	switch s.Kind {
	case KindRepository:
		return decodeInto[repositorySpec](s)
	case KindEnvironment:
		return decodeInto[environmentSpec](s)
	case KindHost:
		return decodeInto[hostSpec](s)
	case KindModelAlias:
		return decodeInto[modelSpec](s)
	case KindTool:
		return decodeInto[toolSpec](s)
	case KindSkill:
		return decodeInto[skillSpec](s)
	case KindKnowledgeBase:
		return decodeInto[knowledgeBaseSpec](s)
	case KindAgent:
		return decodeInto[agentSpec](s)
	case KindGateway:
		return decodeInto[gatewaySpec](s)
	case KindWorkflow:
		return decodeInto[workflowSpec](s)
	case KindTarget:
		return decodeInto[targetSpec](s)
	}
	return fmt.Errorf("%s: no decoder for kind %s", s.File, s.Kind)
}

func decodeInto[T any](s *source) error {
	var d doc[T]
	if err := s.decode(&d); err != nil {
		return err
	}
	// A large repository repeats most of its names in every document:
	// hold each once.
	intern.Strings(&d.Spec)
	s.spec = d.Spec
	return nil
}

// doc is the common shape of every source document.
type doc[T any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec T `json:"spec"`
}
