package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
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
