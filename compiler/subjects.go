package compiler

import (
	"sort"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/schemas"
)

// envTarget is a Target document selected for the environment.
type envTarget struct {
	e      *entry[targetSpec]
	*lease                 // shared by the host's targets of one lease profile
	policy *policy         // while the target's host is compiled
	subj   *bundle.Subject // the subject's frozen policy version
}

// lease is a target's lease profile, its digest and the renewal of its
// host's snapshots of that profile: the same for every target of one host
// and profile, so held once for them (at 100,000 targets a copy per target
// was ≈ 16 MB of the compile's live heap).
type lease struct {
	profile leaseProfile
	pdigest string
	renew   renewal // when an unchanged snapshot is re-issued ahead of its window's end
}

func (c *compilation) selectTargets() ([]*envTarget, error) {
	m := c.m
	var out []*envTarget
	seen := map[[2]string]*source{}
	profDigests := map[string]string{} // by lease profile name
	leases := map[[2]string]*lease{}   // by lease profile name and host
	subjectKinds := map[string]string{bundle.AudienceAgent: KindAgent, bundle.AudienceGateway: KindGateway, bundle.AudienceKnowledge: KindHost}
	for _, name := range sortedKeys(m.targets) {
		t := m.targets[name]
		sp := &t.spec
		s := t.src
		// Every target's identity, whatever its environment.
		for _, f := range []struct {
			field, value string
			check        func(string) error
		}{{"host", sp.Host, bundle.CheckHost}, {"serviceId", sp.ServiceID, bundle.CheckServiceID}, {"envTag", sp.EnvTag, bundle.CheckEnvTag}} {
			if err := f.check(f.value); err != nil {
				return nil, s.errorf([]string{"spec", f.field}, "%v (the identity names the OCI repository <prefix>/<envTag>/<host>/<serviceId>)", err)
			}
		}
		if sp.EnvTag != c.env {
			// A target of another environment is that environment's;
			// one of no environment would never be compiled (a typo:
			// envTag: dve), so it is refused, not skipped.
			if m.envs[sp.EnvTag] == nil {
				return nil, errUnknownEnv(s, sp.EnvTag)
			}
			continue
		}
		if _, _, err := m.hostTenant(s, sp.Host); err != nil {
			return nil, err
		}
		k := [2]string{sp.Host, sp.ServiceID}
		if prev := seen[k]; prev != nil {
			return nil, s.errorf([]string{"spec", "serviceId"}, "target %s/%s/%s is already defined in %s", sp.Host, sp.ServiceID, sp.EnvTag, prev.File)
		}
		seen[k] = s
		prof, ok := m.repo.spec.LeaseProfiles[sp.LeaseProfile]
		if !ok {
			return nil, errUnknown(s, []string{"spec", "leaseProfile"}, "lease profile", sp.LeaseProfile)
		}
		want := subjectKinds[sp.Audience]
		if sp.Subject.Kind != want {
			return nil, s.errorf([]string{"spec", "subject", "kind"}, "audience %s needs a subject of kind %s, not %s", sp.Audience, want, sp.Subject.Kind)
		}
		var subjHost string
		switch want {
		case KindAgent:
			if a := m.agents[sp.Subject.Name]; a != nil {
				subjHost = a.spec.Host
			}
		case KindGateway:
			if g := m.gateways[sp.Subject.Name]; g != nil {
				subjHost = g.spec.Host
			}
		case KindHost:
			if m.hosts[sp.Subject.Name] != nil {
				subjHost = sp.Subject.Name
			}
		}
		if subjHost == "" {
			return nil, errUnknown(s, []string{"spec", "subject", "name"}, want, sp.Subject.Name)
		}
		if err := sameHost(s, []string{"spec", "subject", "name"}, sp.Host, want, sp.Subject.Name, subjHost); err != nil {
			return nil, err
		}
		if err := checkSettingKeys(s, []string{"spec", "settings"}, sp.Settings, true); err != nil {
			return nil, err
		}
		pd, ok := profDigests[sp.LeaseProfile]
		if !ok {
			bp := bundle.LeaseProfile{ValidFor: prof.ValidFor, RefreshAfter: prof.RefreshAfter,
				Delivery: bundle.Lease{RefreshAfter: prof.Delivery.RefreshAfter, ExpiresAfter: prof.Delivery.ExpiresAfter}}
			var err error
			if pd, err = bp.ComputeDigest(); err != nil {
				return nil, err
			}
			profDigests[sp.LeaseProfile] = pd
		}
		l := leases[[2]string{sp.LeaseProfile, sp.Host}]
		if l == nil {
			l = &lease{profile: prof, pdigest: pd, renew: renewalOf(prof, sp.EnvTag, sp.Host)}
			leases[[2]string{sp.LeaseProfile, sp.Host}] = l
		}
		out = append(out, &envTarget{e: t, lease: l})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := &out[i].e.spec, &out[j].e.spec
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.ServiceID < b.ServiceID
	})
	return out, nil
}

// errUnknownEnv refuses a target whose envTag names no Environment
// document, suggesting the closest one.
func errUnknownEnv(s *source, envTag string) error {
	path := []string{"spec", "envTag"}
	if s.index != nil {
		if m := schemas.Closest(envTag, s.index.names(KindEnvironment)); m != "" {
			return s.errorf(path, "no Environment document defines envTag %q (did you mean %q?): the target would never be compiled", envTag, m)
		}
	}
	return s.errorf(path, "no Environment document defines envTag %q (add environments/%s.yaml): the target would never be compiled", envTag, envTag)
}

// hostGroup is one host of the environment: the indexes (into the sorted
// target list) of its targets. Hosts are independent: every reference of a
// subject (tools, skills, models, workflows, bound Agents) is on its host.
type hostGroup struct {
	host string
	idx  []int
}

// hostGroups groups the targets (sorted by host) by host, adding the hosts
// that own Agents but no target of the environment (their Agents are
// resolved too: a broken Agent fails the compile, and workflow views pin
// Agent digests). Sorted by host.
func (c *compilation) hostGroups(ts []*envTarget) []hostGroup {
	var out []hostGroup
	seen := map[string]bool{}
	for i, t := range ts {
		h := t.e.spec.Host
		if len(out) == 0 || out[len(out)-1].host != h {
			out = append(out, hostGroup{host: h})
			seen[h] = true
		}
		out[len(out)-1].idx = append(out[len(out)-1].idx, i)
	}
	for h := range c.m.agentsByHost {
		if !seen[h] {
			out = append(out, hostGroup{host: h})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].host < out[j].host })
	return out
}

// resolveSubjects resolves the Agent policies of host g and the policy of
// each subject its targets serve, by subject (kind, name). m is the host's
// view of the model: resolution writes only its caches.
func resolveSubjects(m *model, g hostGroup, ts []*envTarget) (agents map[string]*policy, subjects map[[2]string]*policy, err error) {
	agents = map[string]*policy{}
	for _, n := range m.agentsByHost[g.host] {
		p, err := m.resolveAgent(n)
		if err != nil {
			return nil, nil, err
		}
		agents[n] = p
	}
	subjects = map[[2]string]*policy{}
	for _, i := range g.idx {
		sp := &ts[i].e.spec
		k := [2]string{sp.Subject.Kind, sp.Subject.Name}
		if subjects[k] != nil {
			continue
		}
		var p *policy
		switch sp.Subject.Kind {
		case KindAgent:
			p = agents[sp.Subject.Name]
		case KindGateway:
			p, err = m.resolveGateway(sp.Subject.Name, agents)
		case KindHost:
			p, err = m.resolveKnowledge(sp.Subject.Name, agents)
		}
		if err != nil {
			return nil, nil, err
		}
		subjects[k] = p
	}
	return agents, subjects, nil
}

// resolveHost freezes the Agent policies of one host and the policy of
// each subject its targets serve, and assigns policy snapshot ids and
// versions against the base. m is the host's view of the model (its own
// resolution caches). It returns the host's Agent policies.
func (c *compilation) resolveHost(m *model, g hostGroup, ts []*envTarget) (map[string]*policy, error) {
	agents, subjects, err := resolveSubjects(m, g, ts)
	if err != nil {
		return nil, err
	}
	vers := map[[2]string]*bundle.Subject{}
	for _, i := range g.idx {
		t := ts[i]
		sp := &t.e.spec
		k := [2]string{sp.Subject.Kind, sp.Subject.Name}
		p := subjects[k]
		if vers[k] == nil {
			ver := int64(1)
			if b := c.baseSubj[k]; b != nil {
				ver = b.PolicyVersion
				if b.PolicyDigest != p.Digest {
					ver++
				}
			}
			vers[k] = &bundle.Subject{Kind: k[0], Name: k[1], PolicySnapshotID: bundle.PolicySnapshotID(k[0], k[1], p.Digest), PolicyVersion: ver, PolicyDigest: p.Digest}
		}
		t.policy, t.subj = p, vers[k]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, p := range agents {
		// Workflow views need the digests of the Agents workflows allow
		// only (those the partitioned model keeps).
		if c.m.agents[n] != nil {
			c.agents[n] = &policy{Kind: p.Kind, Name: p.Name, Host: p.Host, Digest: p.Digest}
		}
	}
	for k, v := range vers {
		c.subjVer[k] = v
	}
	return agents, nil
}
