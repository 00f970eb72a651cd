package console

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/secretscan"
)

// maxValueLen bounds a value shown in a diff; longer ones are cut.
const maxValueLen = 120

// secretRef is what a diff shows instead of a secret reference's target.
const secretRef = "(secret reference)"

// inputChanges compares the inputs (path, digest) of two release
// definitions. Unparseable definitions give no input changes. A release file
// (the root or a host's shard) byte-identical in both states the same inputs
// and is not read: after a change to one Agent of 100,000 targets, only the
// roots and that host's shards are parsed.
func inputChanges(base, def []byte) []InputChange {
	baseFiles, curFiles := releaseFiles(base), releaseFiles(def)
	same := map[string]bool{}
	for p, b := range curFiles {
		if o, ok := baseFiles[p]; ok && bytes.Equal(o, b) {
			same[p] = true
		}
	}
	old, cur := inputDigests(baseFiles, same), inputDigests(curFiles, same)
	out := []InputChange{}
	for p, d := range cur {
		if old[p] != d {
			out = append(out, InputChange{Path: p, Old: old[p], New: d})
		}
	}
	for p, d := range old {
		if _, ok := cur[p]; !ok {
			out = append(out, InputChange{Path: p, Old: d})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// releaseFiles returns a release definition's files by path: an archive's
// root and shards, or a single-file manifest as one file. An empty or
// unreadable definition has none.
func releaseFiles(def []byte) map[string][]byte {
	out := map[string][]byte{}
	switch {
	case len(def) == 0:
	case !bundle.IsArchive(def):
		out[""] = def
	default:
		files, err := bundle.SplitArchive(def)
		if err != nil {
			return out
		}
		for _, f := range files {
			out[f.Path] = f.Bytes
		}
	}
	return out
}

// inputDigests reads the inputs the files not in skip state.
func inputDigests(files map[string][]byte, skip map[string]bool) map[string]string {
	out := map[string]string{}
	for p, b := range files {
		if !skip[p] {
			addInputs(out, b)
		}
	}
	return out
}

// addInputs adds the inputs one release file states: the root's (or a
// single-file manifest's) input files by path, and a shard's host inputs
// digest and subject digests, which stand for the host's own source files.
func addInputs(out map[string]string, b []byte) {
	var doc struct {
		Host   string `yaml:"host"`
		Inputs []struct {
			Path   string `yaml:"path"`
			Digest string `yaml:"digest"`
		} `yaml:"inputs"`
		InputsDigest string  `yaml:"inputsDigest"`
		Subjects     [][]any `yaml:"subjects"`
	}
	if yaml.Unmarshal(b, &doc) != nil {
		return
	}
	for _, in := range doc.Inputs {
		out[in.Path] = in.Digest
	}
	if doc.Host == "" {
		return
	}
	if doc.InputsDigest != "" {
		out["inputs of host "+doc.Host] = doc.InputsDigest
	}
	for _, row := range doc.Subjects {
		if len(row) < 3 {
			continue
		}
		subject, ok := row[0].(string)
		digest, ok2 := row[len(row)-1].(string)
		if ok && ok2 {
			out[subject+" on "+doc.Host] = digest
		}
	}
}

// envelopeKey is the values.yml section every release changes (publication
// identity, release version, lease window); a diff counts its changes
// instead of listing them.
const envelopeKey = "runtimePolicy"

// diffValues compares two values.yml documents leaf by leaf. old may be nil
// (a new target). It returns the changed leaves outside the envelope, in
// path order, and how many envelope leaves changed.
func diffValues(old, cur []byte) ([]Change, int, error) {
	o, err := leaves(old)
	if err != nil {
		return nil, 0, fmt.Errorf("parse previous values: %w", err)
	}
	n, err := leaves(cur)
	if err != nil {
		return nil, 0, fmt.Errorf("parse values: %w", err)
	}
	var out []Change
	envelope := 0
	add := func(p, ov, nv string) {
		if p == envelopeKey || strings.HasPrefix(p, envelopeKey+".") {
			envelope++
			return
		}
		ov, nv = cutPair(ov, nv)
		out = append(out, Change{Path: p, Old: ov, New: nv})
	}
	// Compared by raw value, shown masked: a changed secret reference is
	// listed, its targets are not.
	for p, nv := range n {
		if ov, ok := o[p]; !ok || ov.raw != nv.raw {
			add(p, o[p].shown, nv.shown)
		}
	}
	for p, ov := range o {
		if _, ok := n[p]; !ok {
			add(p, ov.shown, "")
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, envelope, nil
}

// leaves flattens a YAML document into dotted paths ("a.b[2].c") and
// display values; secret references are masked and long values cut.
func leaves(b []byte) (map[string]leaf, error) {
	out := map[string]leaf{}
	if len(b) == 0 {
		return out, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		flatten(root.Content[0], "", "", out)
	}
	return out, nil
}

// leaf is a scalar's raw value (for comparison) and what a page shows.
type leaf struct{ raw, shown string }

func flatten(n *yaml.Node, path, key string, out map[string]leaf) {
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			out[path] = leaf{"{}", "{}"}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(n.Content[i+1], p, k, out)
		}
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			out[path] = leaf{"[]", "[]"}
		}
		for i, c := range n.Content {
			flatten(c, path+"["+strconv.Itoa(i)+"]", key, out)
		}
	case yaml.AliasNode:
		flatten(n.Alias, path, key, out)
	default:
		out[path] = leaf{n.Tag + ":" + n.Value, display(key, n)}
	}
}

// display renders a scalar for the diff: secret references and values
// under credential-like keys are masked (cutPair cuts long values).
func display(key string, n *yaml.Node) string {
	v := n.Value
	if isSecretRef(key, v) {
		return secretRef
	}
	if n.Tag == "!!null" {
		return "null"
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 || n.Tag == "!!str" {
		v = strconv.Quote(v)
	}
	return v
}

// cutPair cuts a changed value's old and new forms to about maxValueLen
// bytes each, on rune boundaries. When they share a long prefix, both
// windows start shortly before the first difference ("…" marks what is
// left out): cutting both at the start showed a change past it as two
// equal values.
func cutPair(a, b string) (string, string) {
	if len(a) <= maxValueLen && len(b) <= maxValueLen {
		return a, b
	}
	start := 0
	if a != "" && b != "" {
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		if i > maxValueLen/2 {
			start = i - maxValueLen/4
		}
	}
	return window(a, start), window(b, start)
}

// window is v from byte start for about maxValueLen bytes, both ends moved
// back to rune boundaries and marked "…" where v goes on.
func window(v string, start int) string {
	start = min(start, len(v))
	for start > 0 && start < len(v) && !utf8.RuneStart(v[start]) {
		start--
	}
	end := min(len(v), start+maxValueLen)
	for end > start && end < len(v) && !utf8.RuneStart(v[end]) {
		end--
	}
	w := v[start:end]
	if start > 0 {
		w = "…" + w
	}
	if end < len(v) {
		w += "…"
	}
	return w
}

// isSecretRef reports whether a value must not be shown: any value of a
// credential-named or reference member (…Ref), a secret reference
// (vault://, env://, file://, …), a URL with user info, or anything the
// literal-credential detector recognizes.
func isSecretRef(key, v string) bool {
	k := secretscan.Normalize(key)
	if secretscan.IsCredentialName(key) || strings.HasSuffix(k, "secretref") || strings.HasSuffix(k, "credentialref") ||
		(strings.HasSuffix(k, "ref") && secretscan.IsReference(v, false)) {
		return true
	}
	for _, p := range []string{secretscan.RefScheme, "env://", "file://", "secret://", "awssm://", "gcpsm://", "azkv://"} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return secretscan.Value(v) != "" || secretscan.Value(key+"="+v) != ""
}

func sortReleaseCounts(rc []ReleaseCount) {
	sort.Slice(rc, func(i, j int) bool { return rc[i].Release > rc[j].Release })
}
