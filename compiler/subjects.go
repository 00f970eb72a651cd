package compiler

import (
	"sort"

	"github.com/configpub/configpub/bundle"
)

// envTarget is a Target document selected for the environment.
type envTarget struct {
	e       *entry[targetSpec]
	profile leaseProfile
	pdigest string
	policy  *policy
}

func (c *compilation) selectTargets() ([]*envTarget, error) {
	m := c.m
	var out []*envTarget
	seen := map[[2]string]*source{}
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
		want := map[string]string{bundle.AudienceAgent: KindAgent, bundle.AudienceGateway: KindGateway, bundle.AudienceKnowledge: KindHost}[sp.Audience]
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
		bp := bundle.LeaseProfile{ValidFor: prof.ValidFor, RefreshAfter: prof.RefreshAfter,
			Delivery: bundle.Lease{RefreshAfter: prof.Delivery.RefreshAfter, ExpiresAfter: prof.Delivery.ExpiresAfter}}
		pd, err := bp.ComputeDigest()
		if err != nil {
			return nil, err
		}
		out = append(out, &envTarget{e: t, profile: prof, pdigest: pd})
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

// resolveSubjects freezes every Agent policy and the policy of each target
// subject, and assigns policy snapshot ids and versions against the base.
func (c *compilation) resolveSubjects(ts []*envTarget) error {
	m := c.m
	c.agents = map[string]*policy{}
	for _, n := range m.agentNames {
		p, err := m.resolveAgent(n)
		if err != nil {
			return err
		}
		c.agents[n] = p
	}
	c.subjects = map[[2]string]*policy{}
	c.subjVer = map[[2]string]*bundle.Subject{}
	for _, t := range ts {
		sp := &t.e.spec
		k := [2]string{sp.Subject.Kind, sp.Subject.Name}
		p := c.subjects[k]
		if p == nil {
			var err error
			switch sp.Subject.Kind {
			case KindAgent:
				p = c.agents[sp.Subject.Name]
			case KindGateway:
				p, err = m.resolveGateway(sp.Subject.Name, c.agents)
			case KindHost:
				p, err = m.resolveKnowledge(sp.Subject.Name, c.agents)
			}
			if err != nil {
				return err
			}
			c.subjects[k] = p
			ver := int64(1)
			if c.base != nil {
				if b := c.base.Subject(k[0], k[1]); b != nil {
					ver = b.PolicyVersion
					if b.PolicyDigest != p.Digest {
						ver++
					}
				}
			}
			c.subjVer[k] = &bundle.Subject{Kind: k[0], Name: k[1], PolicySnapshotID: bundle.PolicySnapshotID(k[0], k[1], p.Digest), PolicyVersion: ver, PolicyDigest: p.Digest}
		}
		t.policy = p
	}
	return nil
}
