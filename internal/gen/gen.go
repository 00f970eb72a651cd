// Package gen generates synthetic policy repositories of any size for
// benchmarks and load tests: per host one Gateway, one Knowledge service with
// two knowledge bases, two model aliases, ten tools (one workflow-backed),
// three skills and AgentsPerHost Agents, each with one target in the
// environment. Output is deterministic for given Options.
package gen

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing/fstest"
)

// Options size a generated repository. The zero value generates 1,000
// targets in environment "bench".
type Options struct {
	Targets       int    // total targets (default 1000); rounded up to whole hosts
	AgentsPerHost int    // default 48 (+ one gateway and one knowledge target per host)
	EnvTag        string // default "bench"
}

func (o *Options) defaults() {
	if o.Targets <= 0 {
		o.Targets = 1000
	}
	if o.AgentsPerHost <= 0 {
		o.AgentsPerHost = 48
	}
	if o.EnvTag == "" {
		o.EnvTag = "bench"
	}
}

// Repo returns the generated repository as an in-memory file system.
func Repo(opts Options) fstest.MapFS {
	opts.defaults()
	m := fstest.MapFS{}
	put := func(p, s string) { m[p] = &fstest.MapFile{Data: []byte(s), Mode: 0o644} }
	put("configpub.yaml", repository)
	put("environments/"+opts.EnvTag+".yaml", fmt.Sprintf(environment, opts.EnvTag))
	perHost := opts.AgentsPerHost + 2
	hosts := (opts.Targets + perHost - 1) / perHost
	n := 0
	for h := 0; h < hosts && n < opts.Targets; h++ {
		host := fmt.Sprintf("h%04d.bench.lightapi.net", h)
		put("hosts/"+host+".yaml", fmt.Sprintf(hostDoc, host, h))
		for i := 0; i < 2; i++ {
			put(fmt.Sprintf("models/%s-m%d.yaml", host, i), fmt.Sprintf(modelDoc, host, i, i))
		}
		put(fmt.Sprintf("workflows/%s.yaml", host), fmt.Sprintf(workflowDoc, host, h, host))
		for i := 0; i < 10; i++ {
			if i == 9 {
				put(fmt.Sprintf("tools/%s-t%d.yaml", host, i), fmt.Sprintf(workflowToolDoc, host, i, host, host, host))
				continue
			}
			put(fmt.Sprintf("tools/%s-t%d.yaml", host, i), fmt.Sprintf(toolDoc, host, i, host, i, host, i, i))
		}
		for i := 0; i < 3; i++ {
			put(fmt.Sprintf("skills/%s-s%d.yaml", host, i), fmt.Sprintf(skillDoc, host, i, host, i, host, 3*i, host, 3*i+1, host, 3*i+2))
		}
		for i := 0; i < 2; i++ {
			put(fmt.Sprintf("knowledge/%s-kb%d.yaml", host, i), fmt.Sprintf(kbDoc, host, i, host, host, i, 10+i))
		}
		put(fmt.Sprintf("gateways/%s.yaml", host), fmt.Sprintf(gatewayDoc, host, host, host))
		svc := func(kind string, i int) string { return fmt.Sprintf("com.networknt.%s-%04d-%03d-1.0.0", kind, h, i) }
		put(fmt.Sprintf("targets/%s/gateway.yaml", host), fmt.Sprintf(targetDoc, host+"-gw", host, svc("gateway", 0), opts.EnvTag, "gateway", "Gateway", host+"-gw", ""))
		put(fmt.Sprintf("targets/%s/knowledge.yaml", host), fmt.Sprintf(targetDoc, host+"-kn", host, svc("knowledge", 0), opts.EnvTag, "knowledge", "Host", host, ""))
		n += 2
		for a := 0; a < opts.AgentsPerHost && n < opts.Targets; a++ {
			name := fmt.Sprintf("%s-a%03d", host, a)
			put("agents/"+name+".yaml", fmt.Sprintf(agentDoc, name, host, h, a, name, host, a%2,
				host, a%10, host, (a+1)%10, host, (a+2)%10, host, a%2, host, 60+a, 100000+a))
			settings := ""
			if a%5 == 0 {
				settings = fmt.Sprintf("  settings:\n    agent:\n      shard: %d\n", a)
			}
			put(fmt.Sprintf("targets/%s/a%03d.yaml", host, a), fmt.Sprintf(targetDoc, name, host, svc("agent", a), opts.EnvTag, "agent", "Agent", name, settings))
			n++
		}
	}
	return m
}

// Write writes the generated repository under dir.
func Write(dir string, opts Options) error {
	for p, f := range Repo(opts) {
		fp := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			return fmt.Errorf("generate %s: %w", p, err)
		}
		if err := os.WriteFile(fp, f.Data, fs.FileMode(0o644)); err != nil {
			return fmt.Errorf("generate %s: %w", p, err)
		}
	}
	return nil
}
