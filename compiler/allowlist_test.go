package compiler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

func compileDir(t *testing.T, dir, env string) *compiler.Result {
	t.Helper()
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: env, CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatalf("compile %s: %v", env, err)
	}
	return res
}

// literalCredential matches a credential-named setting whose value is not a
// secretRef.
var literalCredential = regexp.MustCompile(`(?i)(password|secret|token|apikey)": "[^v]|(password|secret|token|apikey): "(?:[^v]|v[^a])`)

// sourceOfKind returns one fixture file per source kind.
var sourceOfKind = map[string]string{
	"Repository": "configpub.yaml", "Environment": "environments/dev.yaml", "Host": "hosts/dev.lightapi.net.yaml",
	"Agent": "agents/account.yaml", "Gateway": "gateways/light-gateway.yaml", "KnowledgeBase": "knowledge/product-docs.yaml",
	"Tool": "tools/transfer-funds.yaml", "Skill": "skills/onboarding.yaml", "ModelAlias": "models/chat-default.yaml",
	"Workflow": "workflows/account-onboarding.yaml", "Target": "targets/dev/account.yaml",
}

// TestFieldOutsideAllowlistsChangesNoArtifact adds fields that every source
// kind accepts but no allowlist names (metadata labels and description) and
// requires every rendered artifact to stay byte-identical.
func TestFieldOutsideAllowlistsChangesNoArtifact(t *testing.T) {
	base := compileFixture(t, "dev")
	for kind, file := range sourceOfKind {
		t.Run(kind, func(t *testing.T) {
			dir := copyRepo(t)
			p := filepath.Join(dir, file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			i := strings.Index(s, "metadata:\n")
			if i < 0 {
				t.Fatalf("%s has no metadata block", file)
			}
			i += len("metadata:\n")
			s = s[:i] + "  labels:\n    canary: \"outside-every-allowlist\"\n" + s[i:]
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			edited := compileDir(t, dir, "dev")
			assertSameArtifacts(t, base, edited)
			for _, tg := range edited.Targets {
				if bytes.Contains(tg.Values, []byte("outside-every-allowlist")) {
					t.Errorf("%s: the label reached the artifact", tg.ServiceID)
				}
			}
		})
	}
}

func assertSameArtifacts(t *testing.T, a, b *compiler.Result) {
	t.Helper()
	if len(a.Targets) != len(b.Targets) {
		t.Fatalf("got %d targets, want %d", len(b.Targets), len(a.Targets))
	}
	for i := range a.Targets {
		if !bytes.Equal(a.Targets[i].Values, b.Targets[i].Values) {
			t.Errorf("%s: artifact changed", a.Targets[i].ServiceID)
		}
	}
}

// TestPolicyOnlyFieldsNeverReachNamespaces changes policy fields that no
// audience's allowlist projects (provider and knowledge credentials, index
// internals for the Agent): the affected policyDigest changes, but no
// namespace byte the field is excluded from.
func TestPolicyOnlyFieldsNeverReachNamespaces(t *testing.T) {
	base := compileFixture(t, "dev")
	tests := []struct {
		name, file, old, new string
		audiences            []string // namespaces that must stay identical
	}{
		{"model credentialRef", "models/chat-default.yaml", "vault://secret/llm/openai#apiKey", "vault://secret/llm/openai-rotated#apiKey", []string{"agent", "gateway", "knowledge"}},
		{"knowledge credentialRef", "knowledge/product-docs.yaml", "vault://secret/knowledge/product-docs#dsn", "vault://secret/knowledge/product-docs-v2#dsn", []string{"agent", "gateway", "knowledge"}},
		{"index internals", "knowledge/product-docs.yaml", "shards: 4", "shards: 8", []string{"agent", "gateway"}},
		{"agent prompt", "agents/advisor.yaml", "You are the advisor of Light Bank.", "You are the wealth advisor of Light Bank.", []string{"gateway", "knowledge"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyRepo(t)
			edit(t, filepath.Join(dir, tt.file), tt.old, tt.new)
			res := compileDir(t, dir, "dev")
			for i, tg := range res.Targets {
				keep := false
				for _, a := range tt.audiences {
					keep = keep || a == tg.Audience
				}
				if keep && maskDigests(t, tg.Namespace) != maskDigests(t, base.Targets[i].Namespace) {
					t.Errorf("%s (%s): namespace changed beyond digest references", tg.ServiceID, tg.Audience)
				}
				if bytes.Contains(tg.Values, []byte(tt.new)) && keep {
					t.Errorf("%s: edited value reached the artifact", tg.ServiceID)
				}
			}
		})
	}
}

// TestForbiddenMaterialNeverRendered scans every artifact of every
// environment: no prompt or skill instructions outside Agent artifacts, no
// provider or knowledge credential reference anywhere, no index internals in
// Agent artifacts, no literal key material.
func TestForbiddenMaterialNeverRendered(t *testing.T) {
	prompts := []string{"You are the account assistant", "You are the advisor", "You are the technical support agent", "Always confirm the account number"}
	creds := []string{"vault://secret/llm/", "vault://secret/knowledge/", "credentialRef"}
	for _, env := range envs {
		res := compileFixture(t, env)
		for _, tg := range res.Targets {
			v := string(tg.Values)
			for _, c := range creds {
				if strings.Contains(v, c) {
					t.Errorf("%s/%s: contains %q", env, tg.ServiceID, c)
				}
			}
			for _, bad := range []string{"PRIVATE KEY", "sk-"} {
				if strings.Contains(v, bad) {
					t.Errorf("%s/%s: contains %q", env, tg.ServiceID, bad)
				}
			}
			if m := literalCredential.FindString(v); m != "" {
				t.Errorf("%s/%s: literal credential %q", env, tg.ServiceID, m)
			}
			if tg.Audience != "agent" {
				for _, p := range append(prompts, "prompt:", "instructions:", "memory:") {
					if strings.Contains(v, p) {
						t.Errorf("%s/%s (%s): contains %q", env, tg.ServiceID, tg.Audience, p)
					}
				}
			}
			if tg.Audience == "agent" {
				for _, p := range []string{"embeddingModel", "shards", "indexGenerations", "issuers", "routing"} {
					if strings.Contains(v, p) {
						t.Errorf("%s/%s: agent artifact contains %q", env, tg.ServiceID, p)
					}
				}
			}
		}
	}
}

// maskDigests drops the members through which a namespace legitimately
// refers to frozen policy (policy and catalog digests, publication ids,
// inventory digests), leaving the projected content itself.
func maskDigests(t *testing.T, ns []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(ns, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "policyDigest" || k == "catalogDigest" || k == "publicationId" || k == "digest" || k == "publications" {
					delete(x, k)
					continue
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	b, _ := json.Marshal(v)
	return string(b)
}
