package compiler

import (
	"github.com/configpub/configpub/internal/render"
)

// resolveGateway builds a Gateway's effective policy: its own enforcement
// settings, the Agents bound to it (by policy digest), the model aliases they
// use and the tools it serves, with a catalog digest over models and tools.
func (m *model) resolveGateway(name string, agents map[string]*policy) (*policy, error) {
	g := m.gateways[name]
	if g == nil {
		return nil, nil
	}
	s, sp := g.src, &g.spec
	host := sp.Host
	tenant, fs, err := m.subjectFiles(s, host)
	if err != nil {
		return nil, err
	}

	issuers := render.List()
	for _, is := range sp.Issuers {
		issuers.Items = append(issuers.Items, render.Map().
			Add("issuer", render.String(is.Issuer)).
			Add("audiences", render.Strings(sortedCopy(is.Audiences))).
			Add("requiredClaims", render.Strings(sortedCopy(is.RequiredClaims))).
			Add("signingKeyRef", render.String(is.SigningKeyRef)))
	}
	lb := sp.Routing.LoadBalancing
	if lb == "" {
		lb = "round-robin"
	}
	budgets := render.Map().Add("tokensPerDay", render.Int(sp.Budgets.TokensPerDay))
	if sp.Budgets.CostPerDay != nil {
		budgets.Add("costPerDay", render.Float(*sp.Budgets.CostPerDay))
	}
	rate := render.Map().Add("requestsPerMinute", render.Int(sp.RateLimits.RequestsPerMinute))
	if sp.RateLimits.Burst != nil {
		rate.Add("burst", render.Int(*sp.RateLimits.Burst))
	}

	bound := render.List()
	aliases := map[string]bool{}
	for _, an := range m.agentsByGateway[name] {
		a := m.agents[an]
		if a == nil || a.spec.Host != host { // another host's Agent (it fails its own resolution)
			continue
		}
		ap := agents[an]
		if ap == nil {
			continue
		}
		fs.merge(ap.Files)
		toolNames := render.List()
		for _, t := range ap.Tree.Get("tools").Items {
			toolNames.Items = append(toolNames.Items, render.String(t.Get("name").Str))
		}
		aliases[a.spec.Model.Alias] = true
		bound.Items = append(bound.Items, render.Map().
			Add("name", render.String(an)).
			Add("policyDigest", render.String(ap.Digest)).
			Add("modelAlias", render.String(a.spec.Model.Alias)).
			Add("tools", toolNames).
			Add("delegation", ap.Tree.Get("gateway").Get("delegation")).
			Add("limits", ap.Tree.Get("limits")))
	}
	models := render.List()
	for _, al := range sortedKeys(aliases) {
		ma := m.models[al]
		fs.add(ma.src)
		models.Items = append(models.Items, render.Map().
			Add("alias", render.String(al)).
			Add("provider", render.String(ma.spec.Provider)).
			Add("model", render.String(ma.spec.Model)).
			Add("credentialRef", render.String(ma.spec.CredentialRef)).
			Add("contextWindow", render.Int(ma.spec.ContextWindow)).
			Add("maxOutputTokens", render.Int(ma.spec.MaxOutputTokens)))
	}
	tools := render.List()
	for _, tn := range m.toolsByGateway[name] {
		t := m.tools[tn]
		if t == nil || t.spec.Host != host { // another host's tool
			continue
		}
		tv, tfs, err := m.toolTree(t.src, []string{"spec", "gateway"}, host, tn)
		if err != nil {
			return nil, err
		}
		fs.merge(tfs)
		tv = tv.Clone()
		tv.Delete("gateway")
		tv.Delete("description")
		tools.Items = append(tools.Items, tv)
	}
	catalog, err := render.Digest(render.Map().Add("models", models).Add("tools", tools))
	if err != nil {
		return nil, err
	}
	tree := render.Map().
		Add("kind", render.String(KindGateway)).
		Add("name", render.String(name)).
		Add("host", render.String(host)).
		Add("tenant", render.String(tenant)).
		Add("issuers", issuers).
		Add("routing", render.Map().
			Add("timeout", render.String(sp.Routing.Timeout)).
			Add("retries", render.Int(sp.Routing.Retries)).
			Add("loadBalancing", render.String(lb))).
		Add("budgets", budgets).
		Add("rateLimits", rate).
		Add("agents", bound).
		Add("models", models).
		Add("tools", tools).
		Add("catalogDigest", render.String(catalog))
	p := &policy{Kind: KindGateway, Name: name, Host: host, Tree: tree, Files: fs}
	return p, freeze(p)
}
