package compiler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

var update = flag.Bool("update", false, "rewrite fixtures/policy-repo/releases, fixtures/golden and fixtures/vectors/targets.json")

// fixtureCreatedAt is the createdAt of the fixture repository's release 1.
var fixtureCreatedAt = time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC)

// updateFixtureManifests recompiles release 1 of every environment of the
// fixture repository from its sources alone and rewrites
// fixtures/policy-repo/releases/<env>.yaml and its shards.
func updateFixtureManifests(t *testing.T) {
	t.Helper()
	for _, env := range envs {
		dir := copyRepo(t)
		if err := os.Remove(filepath.Join(dir, compiler.ManifestPath(env))); err != nil {
			t.Fatal(err)
		}
		res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: env, CreatedAt: fixtureCreatedAt})
		if err != nil {
			t.Fatalf("compile %s: %v", env, err)
		}
		if err := compiler.Write(context.Background(), res, fixtureRepo, ""); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	goldenDir   = "../fixtures/golden"
	vectorsFile = "../fixtures/vectors/targets.json"
)

// targetVector is one line of fixtures/vectors/targets.json.
type targetVector struct {
	EnvTag            string `json:"envTag"`
	Host              string `json:"host"`
	ServiceID         string `json:"serviceId"`
	Audience          string `json:"audience"`
	PolicyDigest      string `json:"policyDigest"`
	ContentDigest     string `json:"contentDigest"`
	PropertySetDigest string `json:"propertySetDigest"`
	ArtifactDigest    string `json:"artifactDigest"`
}

// writeTree compiles env from repo and writes the outputs under out,
// returning every file (path relative to out/env) and its bytes.
func writeTree(t *testing.T, repo, env string) map[string][]byte {
	t.Helper()
	res, err := compiler.Compile(context.Background(), os.DirFS(repo), compiler.Options{EnvTag: env})
	if err != nil {
		t.Fatalf("compile %s: %v", env, err)
	}
	out := t.TempDir()
	if err := compiler.Write(context.Background(), res, "", out); err != nil {
		t.Fatal(err)
	}
	files := readTree(t, filepath.Join(out, env))
	for _, w := range res.Workflows {
		files["workflows/"+w.Name+"@"+w.Version+".yml"] = w.Values
	}
	files["release.yaml"] = res.ManifestBytes
	return files
}

func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

func TestGolden(t *testing.T) {
	if *update {
		updateFixtureManifests(t)
	}
	var vectors []targetVector
	for _, env := range envs {
		got := writeTree(t, fixtureRepo, env)
		dir := filepath.Join(goldenDir, env)
		if *update {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			for p, b := range got {
				fp := filepath.Join(dir, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(fp, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := readTree(t, dir)
		if len(want) == 0 {
			t.Fatalf("no golden files under %s; run go test ./compiler -run TestGolden -update", dir)
		}
		for p := range want {
			if _, ok := got[p]; !ok {
				t.Errorf("%s/%s: golden file not produced", env, p)
			}
		}
		for _, p := range sortedNames(got) {
			if !bytes.Equal(got[p], want[p]) {
				t.Errorf("%s/%s: output differs from the golden file (run with -update after reviewing)", env, p)
			}
		}
		res := compileFixture(t, env)
		for _, tg := range res.Targets {
			vectors = append(vectors, targetVector{env, tg.Host, tg.ServiceID, tg.Audience, tg.PolicyDigest, tg.ContentDigest, tg.PropertySetDigest, tg.ArtifactDigest})
		}
	}
	b, err := json.MarshalIndent(vectors, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(vectorsFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("%s differs from the compiled digests", vectorsFile)
	}
}

func sortedNames(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestDeterminism compiles the fixtures from two different directories, once
// with GOMAXPROCS=1 and once with the default, and requires byte-identical
// outputs that equal the golden files.
func TestDeterminism(t *testing.T) {
	for _, env := range envs {
		a, b := copyRepo(t), copyRepo(t)
		prev := runtime.GOMAXPROCS(1)
		one := writeTree(t, a, env)
		runtime.GOMAXPROCS(prev)
		def := writeTree(t, b, env)
		golden := readTree(t, filepath.Join(goldenDir, env))
		if len(one) != len(def) || len(one) != len(golden) {
			t.Fatalf("%s: %d vs %d vs %d (golden) files", env, len(one), len(def), len(golden))
		}
		for p := range one {
			if !bytes.Equal(one[p], def[p]) {
				t.Errorf("%s/%s: GOMAXPROCS=1 and default outputs differ", env, p)
			}
			if !bytes.Equal(one[p], golden[p]) {
				t.Errorf("%s/%s: output differs from golden", env, p)
			}
		}
	}
}
