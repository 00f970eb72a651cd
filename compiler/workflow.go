package compiler

import (
	"sort"
	"strings"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
)

// WorkflowView is the internal Workflow policy view of one PUBLISHED
// workflow version (not delivered through the Config Server). It pins the
// definition, the tool bindings, the endpoint target set and the policy
// digests of the Agents allowed to start it.
type WorkflowView struct {
	Name, WfDefID, Version, State string
	DefinitionDigest              string // digest of the whole version (immutable once PUBLISHED)
	PolicyDigest                  string // digest of the view
	Values                        []byte // configpub-yaml/1 rendering of the view
}

// versionTree is the immutable content of a workflow version.
func versionTree(v *workflowVersion) *render.Value {
	limits := render.Map().
		Add("timeout", render.String(v.Limits.Timeout)).
		Add("retries", render.Int(v.Limits.Retries)).
		Add("concurrency", render.Int(v.Limits.Concurrency))
	if v.Limits.CostCeiling != nil {
		limits.Add("costCeiling", render.Float(*v.Limits.CostCeiling))
	}
	runner := render.Map().Add("sandbox", render.String(v.Runner.Sandbox))
	if v.Runner.Image != "" {
		runner.Add("image", render.String(v.Runner.Image))
	}
	retention := render.Map().Add("artifactsDays", render.Int(0))
	if v.Retention != nil {
		retention = render.Map().Add("artifactsDays", render.Int(v.Retention.ArtifactsDays))
	}
	return render.Map().
		Add("version", render.String(v.Version)).
		Add("state", render.String(v.State)).
		Add("definition", v.Definition).
		Add("limits", limits).
		Add("approvals", render.Strings(sortedCopy(v.Approvals))).
		Add("agents", render.Strings(sortedCopy(v.Agents))).
		Add("runner", runner).
		Add("retention", retention)
}

// workflowVersionDigest is the digest that pins a version's content. The
// state is excluded so that publishing a DRAFT is not itself a change.
func workflowVersionDigest(v *workflowVersion) (string, error) {
	t := versionTree(v)
	t.Delete("state")
	return render.Digest(t)
}

// checkWorkflows validates every workflow (ceilings, agent references,
// unique versions and wfDefIds) against the workflow ledger of the base
// release: a version the ledger holds must keep its digest and stay
// PUBLISHED, whether or not it was deleted from the sources in between. It
// returns the manifest's workflow entries and the ledger of release, which
// carries every base entry forward and adds the versions release publishes
// for the first time.
func (m *model) checkWorkflows(base *bundle.Manifest, release int64) ([]bundle.WorkflowVersion, []bundle.LedgerEntry, error) {
	ledger := map[string]bundle.LedgerEntry{}
	if base != nil {
		for _, e := range base.WorkflowLedger {
			ledger[e.Key()] = e
		}
	}
	var out []bundle.WorkflowVersion
	defIDs := map[string]*source{}
	for _, name := range sortedKeys(m.workflows) {
		w := m.workflows[name]
		s := w.src
		if _, _, err := m.hostTenant(s, w.spec.Host); err != nil {
			return nil, nil, err
		}
		if other := defIDs[w.spec.WfDefID]; other != nil {
			return nil, nil, s.errorf([]string{"spec", "wfDefId"}, "wfDefId %s is already used by %s", w.spec.WfDefID, other.File)
		}
		defIDs[w.spec.WfDefID] = s
		seen := map[string]bool{}
		for i := range w.spec.Versions {
			v := &w.spec.Versions[i]
			path := []string{"spec", "versions", idx(i)}
			if seen[v.Version] {
				return nil, nil, s.errorf(append(path, "version"), "duplicate workflow version %s", v.Version)
			}
			seen[v.Version] = true
			if err := m.ceilingDuration(s, append(path, "limits", "timeout"), "maxWorkflowTimeout", v.Limits.Timeout); err != nil {
				return nil, nil, err
			}
			if err := m.ceilingInt(s, append(path, "limits", "retries"), "maxWorkflowRetries", v.Limits.Retries); err != nil {
				return nil, nil, err
			}
			if err := m.ceilingInt(s, append(path, "limits", "concurrency"), "maxWorkflowConcurrency", v.Limits.Concurrency); err != nil {
				return nil, nil, err
			}
			for j, a := range v.Agents {
				ag := m.agents[a]
				if ag == nil {
					return nil, nil, errUnknown(s, append(path, "agents", idx(j)), KindAgent, a)
				}
				if err := sameHost(s, append(path, "agents", idx(j)), w.spec.Host, KindAgent, a, ag.spec.Host); err != nil {
					return nil, nil, err
				}
			}
			d, err := workflowVersionDigest(v)
			if err != nil {
				return nil, nil, s.errorf(path, "%v", err)
			}
			key := w.spec.WfDefID + "@" + v.Version
			if old, ok := ledger[key]; ok {
				if old.Digest != d {
					return nil, nil, s.errorf(path, "workflow version %s (%s@%s) was PUBLISHED in release %d with digest %s; the sources now digest to %s: a published version never changes, publish a new version instead",
						key, name, v.Version, old.PublishedIn, old.Digest, d)
				}
				if v.State != "PUBLISHED" {
					return nil, nil, s.errorf(append(path, "state"), "workflow version %s (%s@%s) was PUBLISHED in release %d and cannot return to %s", key, name, v.Version, old.PublishedIn, v.State)
				}
			} else if v.State == "PUBLISHED" {
				ledger[key] = bundle.LedgerEntry{WfDefID: w.spec.WfDefID, Version: v.Version, Digest: d, PublishedIn: release}
			}
			out = append(out, bundle.WorkflowVersion{Name: name, WfDefID: w.spec.WfDefID, Version: v.Version, State: v.State, Digest: d})
		}
	}
	if out == nil {
		out = []bundle.WorkflowVersion{}
	}
	entries := make([]bundle.LedgerEntry, 0, len(ledger))
	for _, k := range sortedKeys(ledger) {
		entries = append(entries, ledger[k])
	}
	return out, entries, nil
}

// workflowViews compiles the internal view of every PUBLISHED version.
func (m *model) workflowViews(agents map[string]*policy, compat int64) ([]WorkflowView, error) {
	var out []WorkflowView
	for _, name := range sortedKeys(m.workflows) {
		w := m.workflows[name]
		for i := range w.spec.Versions {
			v := &w.spec.Versions[i]
			if v.State != "PUBLISHED" {
				continue
			}
			d, err := workflowVersionDigest(v)
			if err != nil {
				return nil, err
			}
			tools := m.toolsByWorkflow[name+"@"+v.Version]
			allowed := render.List()
			for _, a := range sortedCopy(v.Agents) {
				pd := ""
				if ap := agents[a]; ap != nil {
					pd = ap.Digest
				}
				allowed.Items = append(allowed.Items, render.Map().Add("name", render.String(a)).Add("policyDigest", render.String(pd)).
					Add("dataBoundary", m.agentDataBoundary(a)).Add("delegation", m.agentDelegation(a)))
			}
			vt := versionTree(v)
			view := render.Map().
				Add("workflow", render.String(name)).
				Add("wfDefId", render.String(w.spec.WfDefID)).
				Add("version", render.String(v.Version)).
				Add("state", render.String(v.State)).
				Add("definitionDigest", render.String(d)).
				Add("limits", vt.Get("limits")).
				Add("approvals", vt.Get("approvals")).
				Add("runner", vt.Get("runner")).
				Add("retention", vt.Get("retention")).
				Add("agents", allowed).
				Add("tools", render.Strings(tools)).
				Add("endpointTargets", render.Strings(endpointTargets(v.Definition))).
				Add("compatibilityGeneration", render.Int(compat))
			pd, err := render.Digest(view)
			if err != nil {
				return nil, err
			}
			view.Add("policyDigest", render.String(pd))
			b, err := render.YAML(render.Map().Add("workflowPolicy", view))
			if err != nil {
				return nil, err
			}
			out = append(out, WorkflowView{Name: name, WfDefID: w.spec.WfDefID, Version: v.Version, State: v.State, DefinitionDigest: d, PolicyDigest: pd, Values: b})
		}
	}
	return out, nil
}

// endpointTargets collects the service ids of every "call: <serviceId>/<op>"
// in a workflow definition.
func endpointTargets(def *render.Value) []string {
	set := map[string]bool{}
	var walk func(v *render.Value)
	walk = func(v *render.Value) {
		switch v.Kind {
		case render.KindMap:
			for i, k := range v.Keys {
				if c := v.Vals[i]; k == "call" && c.Kind == render.KindString {
					svc, _, _ := strings.Cut(c.Str, "/")
					set[svc] = true
					continue
				}
				walk(v.Vals[i])
			}
		case render.KindList:
			for _, it := range v.Items {
				walk(it)
			}
		}
	}
	if def != nil {
		walk(def)
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// agentDataBoundary is the data boundary of an Agent a workflow allows: work
// it starts stays within it.
func (m *model) agentDataBoundary(name string) *render.Value {
	b := m.agents[name].spec.DataBoundary
	return render.Map().
		Add("region", render.String(b.Region)).
		Add("piiAllowed", render.Bool(b.PIIAllowed)).
		Add("allowedTenants", render.Strings(sortedCopy(b.AllowedTenants)))
}

// agentDelegation is the delegation an Agent a workflow allows may pass on;
// none is an explicit empty delegation (absence never widens authority).
func (m *model) agentDelegation(name string) *render.Value {
	d := render.Map().Add("maxDepth", render.Int(0)).Add("scopes", render.Strings([]string{}))
	if g := m.agents[name].spec.Gateway.Delegation; g != nil {
		d = render.Map().Add("maxDepth", render.Int(g.MaxDepth)).Add("scopes", render.Strings(sortedCopy(g.Scopes)))
	}
	return d
}
