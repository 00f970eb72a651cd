package deploy

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/configserver/auth"
)

// docs decodes every YAML document in a file.
func docs(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var out []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}

func get(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

func TestKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found: %v", err)
	}
	kinds := map[string]map[string]any{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for i, d := range docs(t, f) {
			for _, field := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}} {
				if s, _ := get(d, field...).(string); s == "" {
					t.Errorf("%s doc %d: missing %v", f, i, field)
				}
			}
			kinds[get(d, "kind").(string)] = d
		}
	}
	dep, svc := kinds["Deployment"], kinds["Service"]
	if dep == nil || svc == nil {
		t.Fatalf("want a Deployment and a Service, got kinds %v", keys(kinds))
	}
	containers, _ := get(dep, "spec", "template", "spec", "containers").([]any)
	if len(containers) == 0 {
		t.Fatal("Deployment has no containers")
	}
	c := containers[0]
	if s, _ := get(c, "image").(string); s == "" {
		t.Error("container has no image")
	}
	if p := get(c, "readinessProbe", "httpGet", "path"); p != "/readyz" {
		t.Errorf("readinessProbe path = %v, want /readyz", p)
	}
	if p := get(c, "livenessProbe", "httpGet", "path"); p != "/healthz" {
		t.Errorf("livenessProbe path = %v, want /healthz", p)
	}
	sel, _ := get(svc, "spec", "selector").(map[string]any)
	labels, _ := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	if len(sel) == 0 {
		t.Fatal("Service has no selector")
	}
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("Service selector %s=%v does not match pod label %v", k, v, labels[k])
		}
	}
	depSel, _ := get(dep, "spec", "selector", "matchLabels").(map[string]any)
	for k, v := range depSel {
		if labels[k] != v {
			t.Errorf("Deployment selector %s=%v does not match pod label %v", k, v, labels[k])
		}
	}
}

func TestWorkflowsAndAction(t *testing.T) {
	wfs, _ := filepath.Glob("../examples/github-workflows/*.yml")
	own, _ := filepath.Glob("../.github/workflows/*.yml")
	wfs = append(wfs, own...)
	if len(wfs) < 3 {
		t.Fatalf("found %d workflow files, want at least 3", len(wfs))
	}
	for _, f := range wfs {
		for _, d := range docs(t, f) {
			if get(d, "on") == nil {
				t.Errorf("%s: no trigger (on:)", f)
			}
			jobs, _ := get(d, "jobs").(map[string]any)
			if len(jobs) == 0 {
				t.Errorf("%s: no jobs", f)
			}
			for name, j := range jobs {
				if steps, _ := get(j, "steps").([]any); len(steps) == 0 {
					t.Errorf("%s: job %s has no steps", f, name)
				}
			}
		}
	}
	a := docs(t, "../action.yml")
	if len(a) != 1 || get(a[0], "runs", "using") != "composite" {
		t.Fatalf("action.yml: want one composite action, got %v", a)
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestEveryYAMLParses: every YAML file under deploy/ is valid YAML whose
// documents are mappings.
func TestEveryYAMLParses(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(p) != ".yaml" && filepath.Ext(p) != ".yml") {
			return err
		}
		n++
		if len(docs(t, p)) == 0 {
			t.Errorf("%s: no document", p)
		}
		return nil
	})
	if err != nil || n < 7 {
		t.Fatalf("walked %d YAML files (%v), want at least 7", n, err)
	}
}

// kustomize reads deploy/kubernetes/kustomization.yaml and returns every
// document of its resources by kind, checking that each resource is a file.
func kustomize(t *testing.T) map[string][]map[string]any {
	t.Helper()
	k := docs(t, "kubernetes/kustomization.yaml")
	if len(k) != 1 || k[0]["kind"] != "Kustomization" || k[0]["namespace"] != "configpub" {
		t.Fatalf("kustomization.yaml: want one Kustomization for namespace configpub, got %v", k)
	}
	res, _ := k[0]["resources"].([]any)
	if len(res) == 0 {
		t.Fatal("kustomization.yaml lists no resources")
	}
	out := map[string][]map[string]any{}
	for _, r := range res {
		p := filepath.Join("kubernetes", r.(string))
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			t.Fatalf("kustomization resource %s is not a file: %v", r, err)
		}
		for _, d := range docs(t, p) {
			kind := get(d, "kind").(string)
			out[kind] = append(out[kind], d)
		}
	}
	return out
}

// container returns the first container of a pod template at path.
func container(t *testing.T, d map[string]any, path ...string) map[string]any {
	t.Helper()
	cs, _ := get(d, append(path, "containers")...).([]any)
	if len(cs) == 0 {
		t.Fatalf("%v has no containers", get(d, "metadata", "name"))
	}
	return cs[0].(map[string]any)
}

func command(c map[string]any) []string {
	var out []string
	for _, k := range []string{"command", "args"} {
		l, _ := c[k].([]any)
		for _, a := range l {
			out = append(out, a.(string))
		}
	}
	return out
}

func TestKustomization(t *testing.T) {
	k := kustomize(t)
	for _, kind := range []string{"Namespace", "Deployment", "Service", "ConfigMap", "Job", "CronJob", "ServiceMonitor"} {
		if len(k[kind]) == 0 {
			t.Errorf("no %s among the kustomization's resources", kind)
		}
	}
	if get(k["Namespace"][0], "metadata", "name") != "configpub" {
		t.Error("the Namespace is not configpub")
	}
	job := container(t, k["Job"][0], "spec", "template", "spec")
	if got := command(job); !reflect.DeepEqual(got, []string{"/usr/local/bin/configpub", "db", "migrate"}) {
		t.Errorf("migration Job runs %v", got)
	}
	// The CronJobs: lease renewal, and the collection of unreferenced
	// artifacts, neither overlapping itself.
	var renew, gc map[string]any
	for _, cron := range k["CronJob"] {
		c := container(t, cron, "spec", "jobTemplate", "spec", "template", "spec")
		got := strings.Join(command(c), " ")
		switch {
		case strings.HasPrefix(got, "/usr/local/bin/configpub lease renew --env "):
			renew = c
		case strings.HasPrefix(got, "/usr/local/bin/configpub db gc"):
			gc = c
			if _, ok := c["volumeMounts"]; ok {
				t.Error("the artifact collection CronJob mounts a volume: it needs no signing key")
			}
		default:
			t.Errorf("CronJob %v runs %q", get(cron, "metadata", "name"), got)
		}
		if get(cron, "spec", "concurrencyPolicy") != "Forbid" {
			t.Errorf("CronJob %v may overlap itself", get(cron, "metadata", "name"))
		}
	}
	if renew == nil || gc == nil {
		t.Fatalf("want a lease renewal and an artifact collection CronJob, got %d CronJobs", len(k["CronJob"]))
	}
	server := container(t, k["Deployment"][0], "spec", "template", "spec")
	if got := command(server); len(got) < 2 || got[0] != "/usr/local/bin/configpub" || got[1] != "serve" {
		t.Errorf("server runs %v", got)
	}
	// Every database URL comes from a Secret, never a literal.
	for _, c := range []map[string]any{job, renew, gc, server} {
		env, _ := c["env"].([]any)
		found := false
		for _, e := range env {
			if get(e, "name") == "CONFIGPUB_DATABASE_URL" {
				found = get(e, "valueFrom", "secretKeyRef", "name") != nil && get(e, "value") == nil
			}
		}
		if !found {
			t.Errorf("container %v: CONFIGPUB_DATABASE_URL not from a Secret", c["name"])
		}
	}
	// The ServiceMonitor selects the Service and scrapes a port it has.
	sm, svc := k["ServiceMonitor"][0], k["Service"][0]
	sel, _ := get(sm, "spec", "selector", "matchLabels").(map[string]any)
	labels, _ := get(svc, "metadata", "labels").(map[string]any)
	for key, v := range sel {
		if labels[key] != v {
			t.Errorf("ServiceMonitor selects %s=%v; the Service has %v", key, v, labels[key])
		}
	}
	eps, _ := get(sm, "spec", "endpoints").([]any)
	ports, _ := get(svc, "spec", "ports").([]any)
	if len(eps) == 0 || len(ports) == 0 || get(eps[0], "port") != get(ports[0], "name") || get(eps[0], "path") != "/metrics" {
		t.Errorf("ServiceMonitor endpoint %v does not scrape /metrics on the Service's port %v", eps, ports)
	}
}

// TestShippedJWKSStarts: the server loads the ConfigMap's JWKS with the
// loader `configpub serve --jwks FILE` uses; an empty key set (which the
// server refuses at start-up) would crash-loop every replica.
func TestShippedJWKSStarts(t *testing.T) {
	var jwks string
	for _, d := range kustomize(t)["ConfigMap"] {
		if s, ok := get(d, "data", "jwks.json").(string); ok {
			jwks = s
		}
	}
	if jwks == "" {
		t.Fatal("no ConfigMap carries jwks.json")
	}
	p := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(p, []byte(jwks), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := auth.LoadKeyFile(p)
	if err != nil || len(keys) == 0 {
		t.Fatalf("the shipped JWKS does not load: %d keys, %v", len(keys), err)
	}
	// The check can fail: the key set the manifest used to ship is refused.
	if err := os.WriteFile(p, []byte(`{"keys": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.LoadKeyFile(p); !errors.Is(err, auth.ErrNoKeys) {
		t.Fatalf("an empty JWKS: got %v, want ErrNoKeys", err)
	}
}
