package compiler

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/sidebyside"
	"github.com/configpub/configpub/schemas"
)

// WorkflowVersionText is one workflow version in normalized YAML: the
// version's immutable content (definition, limits, approvals, agents,
// runner, retention) and state, keys sorted at every level, rendered with
// configpub-yaml/1.
type WorkflowVersionText struct {
	Version, State, Digest string
	YAML                   []byte
}

// WorkflowDiff compares two versions of one workflow.
type WorkflowDiff struct {
	Workflow, WfDefID string
	Old, New          *WorkflowVersionText // Old is nil for a first version
	// Ignored lists the source files and directories Git ignores that
	// were not read (DiffWorkflowVersions' ignored; Result.Ignored).
	Ignored []string
}

// DiffWorkflowVersions reads the policy repository in fsys and returns the
// normalized versions v1 and v2 of the workflow whose wfDefId (or name) is
// wf. ignored is Options.Ignored: the files Git ignores and does not track
// are not read, as compile does not read them (nil: none is).
func DiffWorkflowVersions(ctx context.Context, fsys fs.FS, ignored func(p string, isDir bool) bool, wf, v1, v2 string) (*WorkflowDiff, error) {
	m, left, err := workflowModel(ctx, fsys, ignored)
	if err != nil {
		if len(left) > 0 {
			// What the ignored files defined may be what is missing.
			err = fmt.Errorf("%w\n(%s)", err, IgnoredNote(left))
		}
		return nil, err
	}
	name, w := m.findWorkflow(wf)
	if w == nil {
		err := fmt.Errorf("workflow diff: no workflow with wfDefId or name %q", wf)
		if len(left) > 0 {
			err = fmt.Errorf("%w\n(%s)", err, IgnoredNote(left))
		}
		return nil, err
	}
	d := &WorkflowDiff{Workflow: name, WfDefID: w.spec.WfDefID, Ignored: left}
	for _, p := range []struct {
		v   string
		dst **WorkflowVersionText
	}{{v1, &d.Old}, {v2, &d.New}} {
		t, err := versionText(&w.spec, p.v)
		if err != nil {
			return nil, fmt.Errorf("workflow diff %s: %w", name, err)
		}
		*p.dst = t
	}
	return d, nil
}

// AddedWorkflowVersions compares the workflow versions of two compiles of a
// policy repository (base nil: none): for every version head has and base
// does not, the diff against the version listed before it in head (Old nil
// when it is the workflow's first). It reads the Workflow documents the
// compiles decoded, not the sources again.
func AddedWorkflowVersions(base, head *Result) ([]*WorkflowDiff, error) {
	if head.workflowSpecs == nil || (base != nil && base.workflowSpecs == nil) {
		return nil, fmt.Errorf("workflow versions: a compile result that does not hold its Workflow documents")
	}
	had := map[string]bool{}
	if base != nil {
		for _, w := range base.workflowSpecs {
			for _, v := range w.Versions {
				had[w.WfDefID+"@"+v.Version] = true
			}
		}
	}
	var out []*WorkflowDiff
	for _, name := range sortedKeys(head.workflowSpecs) {
		w := head.workflowSpecs[name]
		for i, v := range w.Versions {
			if had[w.WfDefID+"@"+v.Version] {
				continue
			}
			d := &WorkflowDiff{Workflow: name, WfDefID: w.WfDefID}
			var err error
			if i > 0 {
				if d.Old, err = versionText(w, w.Versions[i-1].Version); err != nil {
					return nil, err
				}
			}
			if d.New, err = versionText(w, v.Version); err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
	return out, nil
}

func workflowModel(ctx context.Context, fsys fs.FS, ignored func(string, bool) bool) (*model, []string, error) {
	set, err := schemas.Default()
	if err != nil {
		return nil, nil, fmt.Errorf("workflow diff: schemas: %w", err)
	}
	ss, err := loadSources(ctx, fsys, set, ignored)
	if err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, ss.ignored, err
	}
	m, err := buildModel(ss)
	return m, ss.ignored, err
}

func (m *model) findWorkflow(wf string) (string, *entry[workflowSpec]) {
	if w := m.workflows[wf]; w != nil {
		return wf, w
	}
	for _, name := range sortedKeys(m.workflows) {
		if m.workflows[name].spec.WfDefID == wf {
			return name, m.workflows[name]
		}
	}
	return "", nil
}

func versionText(w *workflowSpec, version string) (*WorkflowVersionText, error) {
	for i := range w.Versions {
		v := &w.Versions[i]
		if v.Version != version {
			continue
		}
		d, err := workflowVersionDigest(v)
		if err != nil {
			return nil, err
		}
		b, err := render.YAML(sortDeep(versionTree(v).Clone()))
		if err != nil {
			return nil, err
		}
		return &WorkflowVersionText{Version: v.Version, State: v.State, Digest: d, YAML: b}, nil
	}
	have := make([]string, len(w.Versions))
	for i := range w.Versions {
		have[i] = w.Versions[i].Version
	}
	return nil, fmt.Errorf("no version %q in the sources (they have %s); a PUBLISHED version deleted from them "+
		"is kept only by its digest in the release's workflowLedger: compare it in a checkout of a commit that still has it",
		version, strings.Join(have, ", "))
}

// sortDeep sorts the keys of every map in v.
func sortDeep(v *render.Value) *render.Value {
	switch v.Kind {
	case render.KindMap:
		v.SortKeys()
		for _, x := range v.Vals {
			sortDeep(x)
		}
	case render.KindList:
		for _, x := range v.Items {
			sortDeep(x)
		}
	}
	return v
}

// WriteSideBySide writes the two normalized versions side by side
// (markers: ' ' equal, '|' changed, '<' only in the old version, '>' only
// in the new one) under a header naming the workflow and both digests.
func (d *WorkflowDiff) WriteSideBySide(w io.Writer) error {
	var a, b []string
	oldTitle := "(none)"
	if d.Old != nil {
		oldTitle = d.Old.Version + " " + d.Old.State
		a = sidebyside.Lines(string(d.Old.YAML))
	}
	newTitle := d.New.Version + " " + d.New.State
	b = sidebyside.Lines(string(d.New.YAML))
	if _, err := fmt.Fprintf(w, "workflow %s (wfDefId %s)\n", d.Workflow, d.WfDefID); err != nil {
		return err
	}
	if d.Old != nil {
		if _, err := fmt.Fprintf(w, "  %s %s\n", d.Old.Version, d.Old.Digest); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "  %s %s\n\n", d.New.Version, d.New.Digest); err != nil {
		return err
	}
	_, err := sidebyside.Write(w, oldTitle, newTitle, a, b)
	return err
}
