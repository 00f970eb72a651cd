package compiler_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
)

// foldKey is a key as a runtime that ignores case, "-" and "_" reads it
// (Viper, Spring's relaxed binding, .NET's configuration binder).
func foldKey(k string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
}

// FuzzCompileEnvironment replaces the fixture's dev Environment (settings,
// freeze windows, activation, health gate) with fuzzed bytes. Compile
// never panics and refuses only with a *SourceError or *ArtifactError;
// what it accepts, the promoter can rely on: the rollout policy survives
// its JSON record (what the promoter stores and reads back) unchanged and
// still valid, and every target's settings are keys that are one key each
// to a runtime that ignores case, "-" and "_", non-empty, in NFC, and none
// of them the envelope or a policy namespace.
func FuzzCompileEnvironment(f *testing.F) {
	base := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(fixtureRepo), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(os.DirFS(fixtureRepo), p)
		base[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	const target = "environments/dev.yaml"
	env := string(base[target].Data)
	f.Add([]byte(env))
	for _, spec := range []string{
		"spec:\n  freezeWindows: [{name: weekend, schedule: \"0 18 * * 5\", duration: 62h, timeZone: Europe/Berlin}]\n  settings:\n",
		"spec:\n  freezeWindows: [{name: year-end, from: \"2026-12-24T00:00:00Z\", until: \"2027-01-02T00:00:00Z\"}]\n  settings:\n",
		"spec:\n  activation: two-phase\n  healthGate: {soak: 10m, rejections: 1}\n  settings:\n",
		"spec:\n  settings:\n    agent:\n      Logging: {level: INFO}\n",
		"spec:\n  settings:\n    agent:\n      log-ging: {level: INFO}\n",
		"spec:\n  settings:\n    agent:\n      RuntimePolicy: {a: 1}\n",
		"spec:\n  settings:\n    agent:\n      \"a.b\": 1\n",
		"spec:\n  settings:\n    agent:\n      \"cafe\\u0301\": 1\n",
	} {
		f.Add([]byte(strings.Replace(env, "spec:\n  settings:\n", spec, 1)))
	}
	reserved := map[string]bool{}
	for _, k := range []string{"runtimePolicy", bundle.Namespace(bundle.AudienceAgent), bundle.Namespace(bundle.AudienceGateway), bundle.Namespace(bundle.AudienceKnowledge)} {
		reserved[foldKey(k)] = true
	}
	opts := compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)}
	f.Fuzz(func(t *testing.T, data []byte) {
		repo := fstest.MapFS{}
		for k, v := range base {
			repo[k] = v
		}
		repo[target] = &fstest.MapFile{Data: data}
		res, err := compiler.Compile(context.Background(), repo, opts)
		if err != nil {
			var se *compiler.SourceError
			var ae *compiler.ArtifactError
			if !errors.As(err, &se) && !errors.As(err, &ae) {
				t.Fatalf("refusal is %T: %v", err, err)
			}
			return
		}
		rb, err := json.Marshal(res.Rollout)
		if err != nil {
			t.Fatal(err)
		}
		var back bundle.Rollout
		if err := json.Unmarshal(rb, &back); err != nil || back.Validate() != nil || !reflect.DeepEqual(back, res.Rollout) {
			t.Fatalf("the rollout record %s reads back as %+v (%v, %v)", rb, back, err, back.Validate())
		}
		for _, tg := range res.Targets {
			var props map[string]json.RawMessage
			if err := json.Unmarshal(tg.PropertySet, &props); err != nil {
				t.Fatalf("%s: property set: %v", tg.Identity(), err)
			}
			seen := map[string]string{}
			for k := range props {
				for _, seg := range strings.Split(k, ".") {
					if seg == "" || !norm.NFC.IsNormalString(seg) {
						t.Fatalf("%s: setting %q has an empty or non-NFC key", tg.Identity(), k)
					}
				}
				fk := foldKey(k)
				if other, dup := seen[fk]; dup {
					t.Fatalf("%s: settings %q and %q are one key to a case-insensitive runtime", tg.Identity(), other, k)
				}
				seen[fk] = k
				if reserved[foldKey(strings.SplitN(k, ".", 2)[0])] {
					t.Fatalf("%s: setting %q is the envelope or a namespace", tg.Identity(), k)
				}
			}
		}
	})
}
