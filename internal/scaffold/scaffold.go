// Package scaffold writes a new policy repository: the smallest set of
// source documents that compiles (a Repository, an Environment, a Host, an
// Agent with the ModelAlias and Gateway it needs, and a Target for it), each
// starting with a yaml-language-server line that points at a self-contained
// copy of its JSON Schema under .configpub/schemas/, and a .gitattributes
// that keeps LF line endings in every checkout.
package scaffold

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing/fstest"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/textlist"
	"github.com/configpub/configpub/schemas"
)

// SchemaDir is where Init writes the editor schemas, relative to the
// repository root. Hidden directories are not read as sources.
const SchemaDir = ".configpub/schemas"

// ErrNotEmpty is returned when the target directory has entries other than
// .git.
var ErrNotEmpty = errors.New("directory is not empty")

// ErrBadEnvTag is returned for an environment name that is not an envTag.
var ErrBadEnvTag = errors.New("not an environment tag")

// Options are the parameters of Init. The zero value is valid.
type Options struct {
	// EnvTag is the environment of the first Target. Default "dev".
	EnvTag string
}

// Result lists what Init wrote.
type Result struct {
	Dir   string
	Files []string // slash-separated paths relative to Dir, sorted
}

// Init writes a new policy repository into dir, creating it when missing. It
// refuses a directory with any entry other than .git (so it may follow
// `git init`). The documents are compiled in memory before anything is
// written; on a write error the files written so far are removed.
func Init(ctx context.Context, dir string, opts Options) (*Result, error) {
	if opts.EnvTag == "" {
		opts.EnvTag = "dev"
	}
	if err := bundle.CheckEnvTag(opts.EnvTag); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadEnvTag, err)
	}
	files, err := Files(opts)
	if err != nil {
		return nil, err
	}
	if _, err := compiler.Compile(ctx, toFS(files), compiler.Options{EnvTag: opts.EnvTag, CreatedAt: time.Unix(0, 0).UTC()}); err != nil {
		return nil, fmt.Errorf("init: the new repository would not compile: %w", err)
	}
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	res := &Result{Dir: dir}
	for _, p := range sortedPaths(files) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		err := os.MkdirAll(filepath.Dir(full), 0o755)
		if err == nil {
			err = os.WriteFile(full, files[p], 0o644)
		}
		if err != nil {
			cleanup(dir, files)
			return nil, fmt.Errorf("init: write %s: %w", full, err)
		}
		res.Files = append(res.Files, p)
	}
	return res, nil
}

// checkEmpty refuses an existing directory with entries other than .git,
// naming a few of them.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != ".git" {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("init %s: %w (it has %s); choose a new or empty directory", dir, ErrNotEmpty, textlist.Join(names, len(names), 3))
}

// cleanup removes the files Init wrote and the directories it created that
// are left empty.
func cleanup(dir string, files map[string][]byte) {
	dirs := map[string]bool{}
	for p := range files {
		_ = os.Remove(filepath.Join(dir, filepath.FromSlash(p)))
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	list := make([]string, 0, len(dirs))
	for d := range dirs {
		list = append(list, d)
	}
	// Deepest first; os.Remove leaves a directory that is not empty.
	sort.Slice(list, func(i, j int) bool { return strings.Count(list[i], "/") > strings.Count(list[j], "/") })
	for _, d := range list {
		_ = os.Remove(filepath.Join(dir, filepath.FromSlash(d)))
	}
}

func sortedPaths(files map[string][]byte) []string {
	out := make([]string, 0, len(files))
	for p := range files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func toFS(files map[string][]byte) fs.FS {
	m := fstest.MapFS{}
	for p, b := range files {
		m[p] = &fstest.MapFile{Data: b, Mode: 0o644}
	}
	return m
}

// GitAttributes is the .gitattributes Init writes: every checkout keeps
// LF line endings (Git for Windows converts to CRLF by default, with
// core.autocrlf=true). configpub reads CRLF as LF; other tools (editors'
// YAML schemas, diffs, scripts) then see the committed bytes too.
const GitAttributes = `# Keep LF line endings in every checkout (core.autocrlf would write CRLF):
# configpub reads CRLF as LF, other tools then see the committed bytes too.
* text=auto eol=lf
`

// Files returns the documents, editor schemas and .gitattributes Init
// writes, by slash-separated path.
func Files(opts Options) (map[string][]byte, error) {
	if opts.EnvTag == "" {
		opts.EnvTag = "dev"
	}
	out := map[string][]byte{".gitattributes": []byte(GitAttributes)}
	kinds := map[string]bool{}
	for _, d := range documents(opts.EnvTag) {
		kinds[d.kind] = true
		var b bytes.Buffer
		rel := strings.Repeat("../", strings.Count(d.path, "/"))
		fmt.Fprintf(&b, "# yaml-language-server: $schema=%s%s/%s.json\n", rel, SchemaDir, strings.ToLower(d.kind))
		b.WriteString(d.body)
		out[d.path] = b.Bytes()
	}
	for k := range kinds {
		name := strings.ToLower(k)
		s, err := schemas.Standalone("source/" + name)
		if err != nil {
			return nil, err
		}
		out[SchemaDir+"/"+name+".json"] = s
	}
	return out, nil
}
