package compiler

import (
	"github.com/configpub/configpub/internal/render"
)

// KindKnowledgeService is the policy kind of a Knowledge target, whose
// subject is a Host: it serves every KnowledgeBase the host owns.
const KindKnowledgeService = "KnowledgeService"

// resolveKnowledge builds the Knowledge service policy of a host: its
// knowledge bases (with ownership, index, retrieval profiles and ceilings)
// and every Agent-to-Knowledge-Base binding.
func (m *model) resolveKnowledge(host string, agents map[string]*policy) (*policy, error) {
	h := m.hosts[host]
	if h == nil {
		return nil, nil
	}
	fs := files{}
	fs.add(h.src)
	fs.add(m.repo.src)
	kbs := render.List()
	for _, name := range m.kbsByHost[host] {
		k := m.kbs[name]
		s, sp := k.src, &k.spec
		fs.add(s)
		if err := m.ceilingInt(s, []string{"spec", "limits", "queriesPerMinute"}, "maxQueriesPerMinute", sp.Limits.QueriesPerMinute); err != nil {
			return nil, err
		}
		if err := m.ceilingInt(s, []string{"spec", "limits", "maxIngestBytesPerDay"}, "maxIngestBytesPerDay", sp.Limits.MaxIngestBytesPerDay); err != nil {
			return nil, err
		}
		profiles := render.List()
		seen := map[string]bool{}
		for i := range sp.RetrievalProfiles {
			p := &sp.RetrievalProfiles[i]
			path := []string{"spec", "retrievalProfiles", idx(i)}
			if seen[p.Name] {
				return nil, s.errorf(append(path, "name"), "duplicate retrieval profile %s", p.Name)
			}
			seen[p.Name] = true
			if err := m.ceilingInt(s, append(path, "topK"), "maxTopK", p.TopK); err != nil {
				return nil, err
			}
			if err := m.ceilingInt(s, append(path, "maxResultTokens"), "maxResultTokens", p.MaxResultTokens); err != nil {
				return nil, err
			}
			pv, err := profileTree(p)
			if err != nil {
				return nil, err
			}
			profiles.Items = append(profiles.Items, pv)
		}
		gens := render.List()
		for _, g := range sortedInts(sp.IndexGenerations) {
			gens.Items = append(gens.Items, render.Int(g))
		}
		kbs.Items = append(kbs.Items, render.Map().
			Add("name", render.String(name)).
			Add("owner", render.String(sp.Owner)).
			Add("tenant", render.String(h.spec.Tenant)).
			Add("credentialRef", render.String(sp.CredentialRef)).
			Add("index", render.Map().
				Add("engine", render.String(sp.Index.Engine)).
				Add("shards", render.Int(sp.Index.Shards)).
				Add("embeddingModel", render.String(sp.Index.EmbeddingModel))).
			Add("indexGenerations", gens).
			Add("retrievalProfiles", profiles).
			Add("limits", render.Map().
				Add("queriesPerMinute", render.Int(sp.Limits.QueriesPerMinute)).
				Add("maxIngestBytesPerDay", render.Int(sp.Limits.MaxIngestBytesPerDay))))
	}
	bindings := render.List()
	for _, an := range m.agentsByHost[host] {
		ap := agents[an]
		if ap == nil || ap.Host != host {
			continue
		}
		kn := ap.Tree.Get("knowledge")
		if kn.Len() == 0 {
			continue
		}
		fs.merge(ap.Files)
		for _, b := range kn.Items {
			bindings.Items = append(bindings.Items, render.Map().
				Add("agent", render.String(an)).
				Add("policyDigest", render.String(ap.Digest)).
				Add("knowledgeBase", b.Get("knowledgeBase")).
				Add("retrievalProfile", b.Get("retrievalProfile")).
				Add("retrievalContractDigest", b.Get("retrievalContractDigest")))
		}
	}
	tree := render.Map().
		Add("kind", render.String(KindKnowledgeService)).
		Add("host", render.String(host)).
		Add("tenant", render.String(h.spec.Tenant)).
		Add("owner", render.String(h.spec.Owner)).
		Add("knowledgeBases", kbs).
		Add("bindings", bindings)
	p := &policy{Kind: KindHost, Name: host, Host: host, Tree: tree, Files: fs}
	return p, freeze(p)
}

// inventory lists the Knowledge control replicas of a policy: knowledge
// bases, retrieval profiles, index generations and agent bindings, each with
// the digest of its content, sorted by kind and id.
func inventory(p *policy) ([]inventoryItem, error) {
	var out []inventoryItem
	add := func(kind, id string, v *render.Value) error {
		d, err := render.Digest(v)
		if err != nil {
			return err
		}
		out = append(out, inventoryItem{Kind: kind, ID: id, Digest: d})
		return nil
	}
	for _, kb := range p.Tree.Get("knowledgeBases").Items {
		name := kb.Get("name").Str
		c := kb.Clone()
		c.Delete("credentialRef")
		if err := add("knowledgeBase", name, c); err != nil {
			return nil, err
		}
		for _, pr := range kb.Get("retrievalProfiles").Items {
			if err := add("retrievalProfile", name+"/"+pr.Get("name").Str, pr); err != nil {
				return nil, err
			}
		}
		for _, g := range kb.Get("indexGenerations").Items {
			if err := add("indexGeneration", name+"/"+itoa(int(g.Int)), g); err != nil {
				return nil, err
			}
		}
	}
	for _, b := range p.Tree.Get("bindings").Items {
		id := b.Get("agent").Str + "/" + b.Get("knowledgeBase").Str + "/" + b.Get("retrievalProfile").Str
		if err := add("binding", id, b); err != nil {
			return nil, err
		}
	}
	sortInventory(out)
	return out, nil
}
