package compiler

import (
	"fmt"
	"sort"
	"time"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/schemas"
)

// entry is one decoded source document.
type entry[T any] struct {
	src  *source
	spec T
}

// model is the decoded policy repository.
type model struct {
	src        *sources
	repo       *entry[repositorySpec]
	envs       map[string]*entry[environmentSpec]
	hosts      map[string]*entry[hostSpec]
	models     map[string]*entry[modelSpec]
	tools      map[string]*entry[toolSpec]
	skills     map[string]*entry[skillSpec]
	kbs        map[string]*entry[knowledgeBaseSpec]
	agents     map[string]*entry[agentSpec]
	gateways   map[string]*entry[gatewaySpec]
	workflows  map[string]*entry[workflowSpec]
	targets    map[string]*entry[targetSpec]
	agentNames []string // sorted

	// Indexes, each list sorted by name.
	agentsByGateway map[string][]string // gateway name -> agents bound to it
	agentsByHost    map[string][]string
	toolsByGateway  map[string][]string
	toolsByWorkflow map[string][]string // "name@version" -> tools bound to it
	kbsByHost       map[string][]string

	// owner names, by kind, the host of every host-scoped object once the
	// model is partitioned (see partition): a host's part tells a
	// reference to another host's object from a reference to nothing.
	owner map[string]map[string]string

	// Memoized resolutions shared by every subject that references them.
	// Cached trees are never mutated; callers that edit one clone it.
	toolCache     map[string]*resolved
	skillCache    map[string]*resolved
	contractCache map[string]string
}

// resolved is a memoized tree with the files it read, or its error.
type resolved struct {
	tree  *render.Value
	files files
	err   error
}

func decodeKind[T any](ss *sources, kind string) (map[string]*entry[T], error) {
	names := ss.names(kind)
	entries := make([]*entry[T], len(names))
	for i, n := range names {
		s := ss.get(kind, n)
		spec, ok := s.spec.(T)
		if !ok {
			return nil, fmt.Errorf("%s: %s document decoded as %T", s.File, kind, s.spec)
		}
		s.spec = nil
		entries[i] = &entry[T]{src: s, spec: spec}
	}
	out := make(map[string]*entry[T], len(names))
	for i, n := range names {
		out[n] = entries[i]
	}
	return out, nil
}

func buildModel(ss *sources) (*model, error) {
	m := &model{src: ss, toolCache: map[string]*resolved{}, skillCache: map[string]*resolved{}, contractCache: map[string]string{}}
	var err error
	repos, err := decodeKind[repositorySpec](ss, KindRepository)
	if err != nil {
		return nil, err
	}
	for _, r := range repos {
		m.repo = r
	}
	if m.envs, err = decodeKind[environmentSpec](ss, KindEnvironment); err != nil {
		return nil, err
	}
	if m.hosts, err = decodeKind[hostSpec](ss, KindHost); err != nil {
		return nil, err
	}
	if m.models, err = decodeKind[modelSpec](ss, KindModelAlias); err != nil {
		return nil, err
	}
	if m.tools, err = decodeKind[toolSpec](ss, KindTool); err != nil {
		return nil, err
	}
	if m.skills, err = decodeKind[skillSpec](ss, KindSkill); err != nil {
		return nil, err
	}
	if m.kbs, err = decodeKind[knowledgeBaseSpec](ss, KindKnowledgeBase); err != nil {
		return nil, err
	}
	if m.agents, err = decodeKind[agentSpec](ss, KindAgent); err != nil {
		return nil, err
	}
	if m.gateways, err = decodeKind[gatewaySpec](ss, KindGateway); err != nil {
		return nil, err
	}
	if m.workflows, err = decodeKind[workflowSpec](ss, KindWorkflow); err != nil {
		return nil, err
	}
	if m.targets, err = decodeKind[targetSpec](ss, KindTarget); err != nil {
		return nil, err
	}
	m.agentNames = ss.names(KindAgent)
	m.index()
	if err := m.checkRepository(); err != nil {
		return nil, err
	}
	return m, nil
}

// checkRepository validates lease profile durations and their order.
func (m *model) checkRepository() error {
	r := m.repo
	for _, name := range sortedKeys(r.spec.LeaseProfiles) {
		p := r.spec.LeaseProfiles[name]
		base := []string{"spec", "leaseProfiles", name}
		valid, err := parseDuration(r.src, append(base, "validFor"), p.ValidFor)
		if err != nil {
			return err
		}
		refresh, err := parseDuration(r.src, append(base, "refreshAfter"), p.RefreshAfter)
		if err != nil {
			return err
		}
		if refresh >= valid {
			return r.src.errorf(append(base, "refreshAfter"), "refreshAfter %s must be shorter than validFor %s", p.RefreshAfter, p.ValidFor)
		}
		var renew time.Duration
		if p.RenewBefore != "" {
			if renew, err = time.ParseDuration(p.RenewBefore); err != nil || renew < 0 {
				return r.src.errorf(append(base, "renewBefore"), "duration %q must be a Go duration such as 168h, or 0s", p.RenewBefore)
			}
			if renew >= valid {
				return r.src.errorf(append(base, "renewBefore"), "renewBefore %s must be shorter than validFor %s (else every release re-issues every snapshot)", p.RenewBefore, p.ValidFor)
			}
		}
		if p.RenewSpread != "" {
			spread, err := time.ParseDuration(p.RenewSpread)
			if err != nil || spread < 0 {
				return r.src.errorf(append(base, "renewSpread"), "duration %q must be a Go duration such as 72h, or 0s", p.RenewSpread)
			}
			if renew+spread >= valid {
				return r.src.errorf(append(base, "renewSpread"), "renewBefore %s plus renewSpread %s must be shorter than validFor %s (else some release re-issues every snapshot of a host)",
					orZero(p.RenewBefore), p.RenewSpread, p.ValidFor)
			}
		}
		dr, err := parseDuration(r.src, append(base, "delivery", "refreshAfter"), p.Delivery.RefreshAfter)
		if err != nil {
			return err
		}
		de, err := parseDuration(r.src, append(base, "delivery", "expiresAfter"), p.Delivery.ExpiresAfter)
		if err != nil {
			return err
		}
		if dr >= de {
			return r.src.errorf(append(base, "delivery", "refreshAfter"), "delivery refreshAfter %s must be shorter than expiresAfter %s", p.Delivery.RefreshAfter, p.Delivery.ExpiresAfter)
		}
	}
	return nil
}

func parseDuration(s *source, path []string, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, s.errorf(path, "duration %q must be a positive Go duration such as 15m or 720h", v)
	}
	return d, nil
}

// ceilingInt checks an integer against a platform ceiling.
func (m *model) ceilingInt(s *source, path []string, name string, v int64) error {
	c := m.repo.spec.Ceilings[name]
	if c == nil || c.Kind != render.KindInt {
		return nil
	}
	if v > c.Int {
		return s.errorf(path, "platform ceiling exceeded: %d > %s %d (%s)", v, name, c.Int, RepositoryFile)
	}
	return nil
}

// ceilingDuration checks a duration against a platform ceiling.
func (m *model) ceilingDuration(s *source, path []string, name string, v string) error {
	d, err := parseDuration(s, path, v)
	if err != nil {
		return err
	}
	c := m.repo.spec.Ceilings[name]
	if c == nil || c.Kind != render.KindString {
		return nil
	}
	limit, err := time.ParseDuration(c.Str)
	if err != nil {
		return m.repo.src.errorf([]string{"spec", "ceilings", name}, "invalid duration %q", c.Str)
	}
	if d > limit {
		return s.errorf(path, "platform ceiling exceeded: %s > %s %s (%s)", v, name, c.Str, RepositoryFile)
	}
	return nil
}

// partition splits the host-scoped objects of m (Agents, Gateways, tools,
// skills, model aliases and knowledge bases) into one model per host of
// hosts, each holding its host's objects only (and its own resolution
// caches), and lets go of them in m, which keeps what the release as a
// whole needs: the Repository, Environment, Host and Workflow documents,
// the Agents that workflows allow, the indexes, and the names of every
// document. Hosts are independent (every reference of a subject is on its
// host), so a host compiles against its part alone, and the part, with the
// documents only it holds, is freed once the host is compiled: a large
// environment does not hold every host's documents until the end.
// Targets are let go in m too (the caller holds the selected ones). After
// partition, m cannot be compiled again.
func (m *model) partition(hosts []hostGroup) []*model {
	at := make(map[string]int, len(hosts))
	parts := make([]*model, len(hosts))
	for i, g := range hosts {
		at[g.host] = i
		p := m.view()
		p.models, p.tools, p.skills, p.kbs, p.agents, p.gateways, p.targets = nil, nil, nil, nil, nil, nil, nil
		parts[i] = p
	}
	m.owner = map[string]map[string]string{
		KindModelAlias:    split(m.models, func(s *modelSpec) string { return s.Host }, at, parts, func(p *model) *map[string]*entry[modelSpec] { return &p.models }),
		KindTool:          split(m.tools, func(s *toolSpec) string { return s.Host }, at, parts, func(p *model) *map[string]*entry[toolSpec] { return &p.tools }),
		KindSkill:         split(m.skills, func(s *skillSpec) string { return s.Host }, at, parts, func(p *model) *map[string]*entry[skillSpec] { return &p.skills }),
		KindKnowledgeBase: split(m.kbs, func(s *knowledgeBaseSpec) string { return s.Host }, at, parts, func(p *model) *map[string]*entry[knowledgeBaseSpec] { return &p.kbs }),
		KindAgent:         split(m.agents, func(s *agentSpec) string { return s.Host }, at, parts, func(p *model) *map[string]*entry[agentSpec] { return &p.agents }),
		KindGateway:       split(m.gateways, func(s *gatewaySpec) string { return s.Host }, at, parts, func(p *model) *map[string]*entry[gatewaySpec] { return &p.gateways }),
	}
	for _, p := range parts {
		p.owner = m.owner
	}
	allowed := map[string]*entry[agentSpec]{}
	for _, w := range m.workflows {
		for i := range w.spec.Versions {
			for _, a := range w.spec.Versions[i].Agents {
				if e := m.agents[a]; e != nil {
					allowed[a] = e
				}
			}
		}
	}
	m.models, m.tools, m.skills, m.kbs, m.gateways, m.targets = nil, nil, nil, nil, nil, nil
	m.agents = allowed
	m.src.letGo()
	return parts
}

// split puts each object of all into the part of its host (parts[at[host]];
// an object of a host without targets or Agents is in none: nothing
// compiles it) and returns every object's host by name.
func split[T any](all map[string]*entry[T], hostOf func(*T) string, at map[string]int, parts []*model, field func(*model) *map[string]*entry[T]) map[string]string {
	owner := make(map[string]string, len(all))
	for n, e := range all {
		h := hostOf(&e.spec)
		owner[n] = h
		if i, ok := at[h]; ok {
			f := field(parts[i])
			if *f == nil {
				*f = map[string]*entry[T]{}
			}
			(*f)[n] = e
		}
	}
	return owner
}

// missing is the error for a reference from src (owned by host) at path to
// the object name of kind that m does not hold: a cross-host reference when
// another host owns it (m is a host's part), else an unresolved one.
func (m *model) missing(src *source, path []string, host, kind, name string) error {
	if other, ok := m.owner[kind][name]; ok && other != host {
		return sameHost(src, path, host, kind, name, other)
	}
	return errUnknown(src, path, kind, name)
}

// toolDefined reports whether a tool of that name exists on any host.
func (m *model) toolDefined(name string) bool {
	if m.owner != nil {
		_, ok := m.owner[KindTool][name]
		return ok
	}
	return m.tools[name] != nil
}

// sameHost refuses a reference from src (owned by host) to an object of
// another host.
func sameHost(src *source, path []string, host, kind, name, otherHost string) error {
	if host != otherHost {
		return src.errorf(path, "cross-host reference: %s %q belongs to host %s, not %s", kind, name, otherHost, host)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedCopy(in []string) []string {
	out := append([]string{}, in...)
	sort.Strings(out)
	return out
}

// files tracks the input files a resolution read.
type files map[string]string

func (f files) add(s *source) { f[s.File] = s.Digest }

func (f files) merge(o files) {
	for k, v := range o {
		f[k] = v
	}
}

func errUnknown(src *source, path []string, kind, name string) error {
	if src.index != nil {
		if m := schemas.Closest(name, src.index.names(kind)); m != "" {
			return src.errorf(path, "unresolved reference: %s %q is not defined (did you mean %q?)", kind, name, m)
		}
	}
	return src.errorf(path, "unresolved reference: %s %q is not defined", kind, name)
}

// index builds the lookup lists used by resolution, so resolving every
// Gateway and Knowledge service stays linear in the repository size.
func (m *model) index() {
	m.agentsByGateway, m.agentsByHost = map[string][]string{}, map[string][]string{}
	for _, n := range m.agentNames {
		a := m.agents[n]
		m.agentsByGateway[a.spec.Gateway.Name] = append(m.agentsByGateway[a.spec.Gateway.Name], n)
		m.agentsByHost[a.spec.Host] = append(m.agentsByHost[a.spec.Host], n)
	}
	m.toolsByGateway, m.toolsByWorkflow = map[string][]string{}, map[string][]string{}
	for _, n := range sortedKeys(m.tools) {
		t := m.tools[n]
		m.toolsByGateway[t.spec.Gateway] = append(m.toolsByGateway[t.spec.Gateway], n)
		if w := t.spec.Workflow; w != nil {
			k := w.Name + "@" + w.Version
			m.toolsByWorkflow[k] = append(m.toolsByWorkflow[k], n)
		}
	}
	m.kbsByHost = map[string][]string{}
	for _, n := range sortedKeys(m.kbs) {
		h := m.kbs[n].spec.Host
		m.kbsByHost[h] = append(m.kbsByHost[h], n)
	}
}

// view returns a shallow copy of m with its own (empty) resolution caches:
// resolution writes only those, so views resolve concurrently.
func (m *model) view() *model {
	v := *m
	v.toolCache, v.skillCache, v.contractCache = map[string]*resolved{}, map[string]*resolved{}, map[string]string{}
	return &v
}

// orZero returns the duration d as written, "0s" when it is not.
func orZero(d string) string {
	if d == "" {
		return "0s"
	}
	return d
}
