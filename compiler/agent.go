package compiler

import (
	"sort"

	"github.com/configpub/configpub/internal/render"
)

// resolveAgent builds an Agent's effective domain policy: references,
// defaults, ownership, platform ceilings. Optional grants with no source
// compile to explicit empty collections (absence never widens authority).
func (m *model) resolveAgent(name string) (*policy, error) {
	a := m.agents[name]
	if a == nil {
		return nil, nil
	}
	s, sp := a.src, &a.spec
	host := sp.Host
	tenant, fs, err := m.subjectFiles(s, host)
	if err != nil {
		return nil, err
	}

	// Model alias and action limits.
	ma := m.models[sp.Model.Alias]
	if ma == nil {
		return nil, m.missing(s, []string{"spec", "model", "alias"}, host, KindModelAlias, sp.Model.Alias)
	}
	if err := sameHost(s, []string{"spec", "model", "alias"}, host, KindModelAlias, sp.Model.Alias, ma.spec.Host); err != nil {
		return nil, err
	}
	fs.add(ma.src)
	if sp.Model.MaxOutputTokens > ma.spec.MaxOutputTokens {
		return nil, s.errorf([]string{"spec", "model", "maxOutputTokens"}, "%d exceeds model alias %s maxOutputTokens %d", sp.Model.MaxOutputTokens, sp.Model.Alias, ma.spec.MaxOutputTokens)
	}
	checks := []struct {
		path    []string
		ceiling string
		v       int64
	}{
		{[]string{"spec", "model", "maxOutputTokens"}, "maxOutputTokens", sp.Model.MaxOutputTokens},
		{[]string{"spec", "model", "maxToolCallsPerTurn"}, "maxToolCallsPerTurn", sp.Model.MaxToolCallsPerTurn},
		{[]string{"spec", "tools"}, "maxToolsPerAgent", int64(len(sp.Tools))},
		{[]string{"spec", "skills"}, "maxSkillsPerAgent", int64(len(sp.Skills))},
		{[]string{"spec", "limits", "requestsPerMinute"}, "maxRequestsPerMinute", sp.Limits.RequestsPerMinute},
		{[]string{"spec", "limits", "tokensPerDay"}, "maxTokensPerDay", sp.Limits.TokensPerDay},
		{[]string{"spec", "session", "maxConcurrent"}, "maxConcurrentSessions", sp.Session.MaxConcurrent},
	}
	if sp.Gateway.Delegation != nil {
		checks = append(checks, struct {
			path    []string
			ceiling string
			v       int64
		}{[]string{"spec", "gateway", "delegation", "maxDepth"}, "maxDelegationDepth", sp.Gateway.Delegation.MaxDepth})
	}
	for _, c := range checks {
		if err := m.ceilingInt(s, c.path, c.ceiling, c.v); err != nil {
			return nil, err
		}
	}
	if err := m.ceilingDuration(s, []string{"spec", "session", "maxLifetime"}, "maxSessionLifetime", sp.Session.MaxLifetime); err != nil {
		return nil, err
	}
	model := render.Map().
		Add("alias", render.String(sp.Model.Alias)).
		Add("provider", render.String(ma.spec.Provider)).
		Add("model", render.String(ma.spec.Model)).
		Add("credentialRef", render.String(ma.spec.CredentialRef)).
		Add("contextWindow", render.Int(ma.spec.ContextWindow)).
		Add("maxOutputTokens", render.Int(sp.Model.MaxOutputTokens))
	if sp.Model.Temperature != nil {
		model.Add("temperature", render.Float(*sp.Model.Temperature))
	}
	model.Add("maxToolCallsPerTurn", render.Int(sp.Model.MaxToolCallsPerTurn))

	// Gateway delegation.
	gw := m.gateways[sp.Gateway.Name]
	if gw == nil {
		return nil, m.missing(s, []string{"spec", "gateway", "name"}, host, KindGateway, sp.Gateway.Name)
	}
	if err := sameHost(s, []string{"spec", "gateway", "name"}, host, KindGateway, sp.Gateway.Name, gw.spec.Host); err != nil {
		return nil, err
	}

	// Tools, in name order; approvals are the union of the agent's list and
	// every tool that requires approval.
	granted := map[string]bool{}
	approvals := map[string]bool{}
	toolIdx := map[string]int{}
	for i, t := range sp.Tools {
		granted[t] = true
		toolIdx[t] = i
	}
	tools := render.List()
	for _, t := range sortedCopy(sp.Tools) {
		path := []string{"spec", "tools", idx(toolIdx[t])}
		tv, tfs, err := m.toolTree(s, path, host, t)
		if err != nil {
			return nil, err
		}
		if g := tv.Get("gateway").Str; g != sp.Gateway.Name {
			return nil, s.errorf(path, "tool %s is served by gateway %s, not the agent's gateway %s", t, g, sp.Gateway.Name)
		}
		if tv.Get("approval").Str == "required" {
			approvals[t] = true
		}
		fs.merge(tfs)
		tools.Items = append(tools.Items, tv)
	}
	for i, t := range sp.Execution.ApprovalRequired {
		if !granted[t] {
			return nil, s.errorf([]string{"spec", "execution", "approvalRequired", idx(i)}, "approval for tool %s, which the agent is not granted", t)
		}
		approvals[t] = true
	}

	// Skills.
	skillIdx := map[string]int{}
	for i, k := range sp.Skills {
		skillIdx[k] = i
	}
	skills := render.List()
	for _, k := range sortedCopy(sp.Skills) {
		kv, kfs, err := m.skillTree(s, []string{"spec", "skills", idx(skillIdx[k])}, host, k, granted)
		if err != nil {
			return nil, err
		}
		fs.merge(kfs)
		skills.Items = append(skills.Items, kv)
	}

	// Knowledge bindings.
	type kbind struct {
		kb, profile, digest string
	}
	var binds []kbind
	for i, b := range sp.Knowledge {
		d, kb, err := m.retrievalContract(s, []string{"spec", "knowledge", idx(i)}, host, b.KnowledgeBase, b.RetrievalProfile)
		if err != nil {
			return nil, err
		}
		fs.add(kb.src)
		binds = append(binds, kbind{b.KnowledgeBase, b.RetrievalProfile, d})
	}
	sort.Slice(binds, func(i, j int) bool {
		if binds[i].kb != binds[j].kb {
			return binds[i].kb < binds[j].kb
		}
		return binds[i].profile < binds[j].profile
	})
	knowledge := render.List()
	for _, b := range binds {
		knowledge.Items = append(knowledge.Items, render.Map().
			Add("knowledgeBase", render.String(b.kb)).
			Add("retrievalProfile", render.String(b.profile)).
			Add("retrievalContractDigest", render.String(b.digest)))
	}

	channels := render.List()
	chs := append(sp.Channels[:0:0], sp.Channels...)
	sort.Slice(chs, func(i, j int) bool {
		if chs[i].Type != chs[j].Type {
			return chs[i].Type < chs[j].Type
		}
		return chs[i].Name < chs[j].Name
	})
	for _, c := range chs {
		channels.Items = append(channels.Items, render.Map().Add("type", render.String(c.Type)).Add("name", render.String(c.Name)))
	}
	delegation := render.Map().Add("maxDepth", render.Int(0)).Add("scopes", render.List())
	if d := sp.Gateway.Delegation; d != nil {
		delegation = render.Map().Add("maxDepth", render.Int(d.MaxDepth)).Add("scopes", render.Strings(sortedCopy(d.Scopes)))
	}

	tree := render.Map().
		Add("kind", render.String(KindAgent)).
		Add("name", render.String(name)).
		Add("host", render.String(host)).
		Add("tenant", render.String(tenant)).
		Add("definition", render.Map().
			Add("id", render.String(sp.Definition.ID)).
			Add("version", render.String(sp.Definition.Version)).
			Add("profile", render.String(sp.Definition.Profile))).
		Add("prompt", render.String(sp.Prompt)).
		Add("model", model).
		Add("tools", tools).
		Add("skills", skills).
		Add("knowledge", knowledge).
		Add("execution", render.Map().
			Add("placement", render.String(sp.Execution.Placement)).
			Add("approvalRequired", render.Strings(sortedKeys(approvals)))).
		Add("memory", render.Map().
			Add("mode", render.String(sp.Memory.Mode)).
			Add("retentionDays", render.Int(sp.Memory.RetentionDays))).
		Add("dataBoundary", render.Map().
			Add("region", render.String(sp.DataBoundary.Region)).
			Add("piiAllowed", render.Bool(sp.DataBoundary.PIIAllowed)).
			Add("allowedTenants", render.Strings(sortedCopy(sp.DataBoundary.AllowedTenants)))).
		Add("channels", channels).
		Add("gateway", render.Map().
			Add("name", render.String(sp.Gateway.Name)).
			Add("delegation", delegation)).
		Add("session", render.Map().
			Add("maxLifetime", render.String(sp.Session.MaxLifetime)).
			Add("maxConcurrent", render.Int(sp.Session.MaxConcurrent))).
		Add("limits", render.Map().
			Add("requestsPerMinute", render.Int(sp.Limits.RequestsPerMinute)).
			Add("tokensPerDay", render.Int(sp.Limits.TokensPerDay)))
	p := &policy{Kind: KindAgent, Name: name, Host: host, Tree: tree, Files: fs}
	return p, freeze(p)
}
