package compiler

import (
	"sort"

	"github.com/configpub/configpub/internal/render"
)

// policy is the frozen effective domain policy of one subject
// (compile step 2).
type policy struct {
	Kind, Name string
	Host       string
	Tree       *render.Value
	Digest     string
	Files      files
}

// toolTree resolves a tool referenced from src at path by an owner on host.
func (m *model) toolTree(src *source, path []string, host, name string) (*render.Value, files, error) {
	t := m.tools[name]
	if t == nil {
		return nil, nil, m.missing(src, path, host, KindTool, name)
	}
	if err := sameHost(src, path, host, KindTool, name, t.spec.Host); err != nil {
		return nil, nil, err
	}
	if c := m.toolCache[name]; c != nil {
		return c.tree, c.files, c.err
	}
	tree, tfs, err := m.buildTool(t, host, name)
	m.toolCache[name] = &resolved{tree: tree, files: tfs, err: err}
	return tree, tfs, err
}

func (m *model) buildTool(t *entry[toolSpec], host, name string) (*render.Value, files, error) {
	fs := files{}
	fs.add(t.src)
	schemaDigest, err := render.Digest(t.spec.InputSchema)
	if err != nil {
		return nil, nil, t.src.errorf([]string{"spec", "inputSchema"}, "%v", err)
	}
	approval := t.spec.Approval
	if approval == "" {
		approval = "none"
	}
	v := render.Map().
		Add("name", render.String(name)).
		Add("description", render.String(t.spec.Description))
	if t.spec.Endpoint != nil {
		v.Add("kind", render.String("endpoint"))
	} else {
		v.Add("kind", render.String("workflow"))
	}
	v.Add("approval", render.String(approval)).
		Add("schemaDigest", render.String(schemaDigest)).
		Add("gateway", render.String(t.spec.Gateway))
	if e := t.spec.Endpoint; e != nil {
		v.Add("endpoint", render.Map().
			Add("serviceId", render.String(e.ServiceID)).
			Add("method", render.String(e.Method)).
			Add("path", render.String(e.Path)))
	}
	if w := t.spec.Workflow; w != nil {
		wv, wfs, err := m.publishedVersion(t.src, []string{"spec", "workflow"}, host, w.Name, w.Version)
		if err != nil {
			return nil, nil, err
		}
		fs.merge(wfs)
		v.Add("workflow", wv)
	}
	return v, fs, nil
}

// publishedVersion resolves a tool's workflow binding; only PUBLISHED
// versions may be bound.
func (m *model) publishedVersion(src *source, path []string, host, name, version string) (*render.Value, files, error) {
	w := m.workflows[name]
	if w == nil {
		return nil, nil, errUnknown(src, append(path, "name"), KindWorkflow, name)
	}
	if err := sameHost(src, append(path, "name"), host, KindWorkflow, name, w.spec.Host); err != nil {
		return nil, nil, err
	}
	for _, ver := range w.spec.Versions {
		if ver.Version != version {
			continue
		}
		if ver.State != "PUBLISHED" {
			return nil, nil, src.errorf(append(path, "version"), "workflow %s version %s is %s; tools bind only to PUBLISHED workflow versions", name, version, ver.State)
		}
		d, err := workflowVersionDigest(&ver)
		if err != nil {
			return nil, nil, err
		}
		fs := files{}
		fs.add(w.src)
		return render.Map().
			Add("name", render.String(name)).
			Add("wfDefId", render.String(w.spec.WfDefID)).
			Add("version", render.String(version)).
			Add("definitionDigest", render.String(d)), fs, nil
	}
	return nil, nil, src.errorf(append(path, "version"), "unresolved reference: workflow %s has no version %s", name, version)
}

// skillTree resolves a skill granted to an agent.
func (m *model) skillTree(src *source, path []string, host, name string, granted map[string]bool) (*render.Value, files, error) {
	s := m.skills[name]
	if s == nil {
		return nil, nil, m.missing(src, path, host, KindSkill, name)
	}
	if err := sameHost(src, path, host, KindSkill, name, s.spec.Host); err != nil {
		return nil, nil, err
	}
	for i, t := range s.spec.Tools {
		if !m.toolDefined(t) {
			return nil, nil, errUnknown(s.src, []string{"spec", "tools", idx(i)}, KindTool, t)
		}
		if !granted[t] {
			return nil, nil, src.errorf(path, "skill %s uses tool %s, which the agent is not granted", name, t)
		}
	}
	if c := m.skillCache[name]; c != nil {
		return c.tree, c.files, c.err
	}
	v := render.Map().
		Add("name", render.String(name)).
		Add("description", render.String(s.spec.Description)).
		Add("instructions", render.String(s.spec.Instructions)).
		Add("tools", render.Strings(sortedCopy(s.spec.Tools)))
	d, err := render.Digest(v)
	if err != nil {
		return nil, nil, err
	}
	v.Add("digest", render.String(d))
	fs := files{}
	fs.add(s.src)
	m.skillCache[name] = &resolved{tree: v, files: fs}
	return v, fs, nil
}

// profileTree returns a retrieval profile with its immutable digest.
func profileTree(p *retrievalProfile) (*render.Value, error) {
	v := render.Map().
		Add("name", render.String(p.Name)).
		Add("topK", render.Int(p.TopK)).
		Add("maxResultTokens", render.Int(p.MaxResultTokens)).
		Add("graphBehavior", render.String(p.GraphBehavior))
	if p.Reranker != "" {
		v.Add("reranker", render.String(p.Reranker))
	}
	d, err := render.Digest(v)
	if err != nil {
		return nil, err
	}
	return v.Add("digest", render.String(d)), nil
}

// retrievalContract resolves an agent's Knowledge binding to the retrieval
// contract digest: knowledge base, profile (with its digest) and the
// permitted index generations.
func (m *model) retrievalContract(src *source, path []string, host, kb, profile string) (string, *entry[knowledgeBaseSpec], error) {
	k := m.kbs[kb]
	if k == nil {
		return "", nil, m.missing(src, append(path, "knowledgeBase"), host, KindKnowledgeBase, kb)
	}
	if err := sameHost(src, append(path, "knowledgeBase"), host, KindKnowledgeBase, kb, k.spec.Host); err != nil {
		return "", nil, err
	}
	if d, ok := m.contractCache[kb+"/"+profile]; ok {
		return d, k, nil
	}
	for i := range k.spec.RetrievalProfiles {
		p := &k.spec.RetrievalProfiles[i]
		if p.Name != profile {
			continue
		}
		pv, err := profileTree(p)
		if err != nil {
			return "", nil, err
		}
		gens := render.List()
		for _, g := range sortedInts(k.spec.IndexGenerations) {
			gens.Items = append(gens.Items, render.Int(g))
		}
		d, err := render.Digest(render.Map().
			Add("knowledgeBase", render.String(kb)).
			Add("retrievalProfile", pv).
			Add("indexGenerations", gens))
		if err == nil {
			m.contractCache[kb+"/"+profile] = d
		}
		return d, k, err
	}
	return "", nil, src.errorf(append(path, "retrievalProfile"), "unresolved reference: knowledge base %s has no retrieval profile %s", kb, profile)
}

func sortedInts(in []int64) []int64 {
	out := append([]int64{}, in...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// subjectFiles starts the policy of the subject defined by src on host:
// the files every such policy reads (its own document, the Repository
// document and the host's Host document) and the host's tenant.
func (m *model) subjectFiles(src *source, host string) (tenant string, fs files, err error) {
	tenant, hfs, err := m.hostTenant(src, host)
	if err != nil {
		return "", nil, err
	}
	fs = files{}
	fs.add(src)
	fs.add(m.repo.src)
	fs.merge(hfs)
	return tenant, fs, nil
}

// hostTenant resolves the Host document an object belongs to.
func (m *model) hostTenant(src *source, host string) (string, files, error) {
	h := m.hosts[host]
	if h == nil {
		return "", nil, errUnknown(src, []string{"spec", "host"}, KindHost, host)
	}
	fs := files{}
	fs.add(h.src)
	return h.spec.Tenant, fs, nil
}

// freeze computes the policy digest.
func freeze(p *policy) error {
	d, err := render.Digest(p.Tree)
	if err != nil {
		return err
	}
	p.Digest = d
	return nil
}
