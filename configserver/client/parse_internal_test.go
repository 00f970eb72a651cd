package client

import (
	"errors"
	"strings"
	"testing"
)

const goodEnvelope = `runtimePolicy:
  publicationId: 00000001-0000-8000-8000-000000000001
  releaseVersion: 1
  policySnapshotId: 00000002-0000-8000-8000-000000000002
  policyVersion: 1
  policyDigest: sha256:0000000000000000000000000000000000000000000000000000000000000000
  contentDigest: sha256:0000000000000000000000000000000000000000000000000000000000000000
  audience: agent
  host: h
  serviceId: s
  envTag: e
  sourceEventSequence: 1
  schemaVersion: 1
  createdAt: 2026-01-01T00:00:00Z
  validFrom: 2026-01-01T00:00:00Z
  refreshAfter: 2026-02-01T00:00:00Z
  expiresAt: 2026-03-01T00:00:00Z
  revocationEpoch: 0
  compatibilityGeneration: 1
`

func TestParseValuesStrict(t *testing.T) {
	cases := []struct {
		name   string
		doc    string
		reason Reason
		field  string
	}{
		{"valid, unquoted timestamps", goodEnvelope + "agentPolicy:\n  a: 1\n", "", ""},
		{"not YAML", "runtimePolicy: [\n", ReasonParse, "values.yml"},
		{"two documents", goodEnvelope + "agentPolicy: {}\n---\nx: 1\n", ReasonParse, "values.yml"},
		{"namespace missing", goodEnvelope, ReasonMissingField, "values.yml:agentPolicy"},
		{"envelope field missing", strings.Replace(goodEnvelope, "  envTag: e\n", "", 1) + "agentPolicy: {}\n", ReasonMissingField, "runtimePolicy.envTag"},
		{"envelope field wrong type", strings.Replace(goodEnvelope, "releaseVersion: 1", "releaseVersion: one", 1) + "agentPolicy: {}\n", ReasonInvalidField, "runtimePolicy.releaseVersion"},
		{"window out of order", strings.Replace(goodEnvelope, "refreshAfter: 2026-02-01", "refreshAfter: 2026-04-01", 1) + "agentPolicy: {}\n", ReasonInvalidField, "runtimePolicy.refreshAfter"},
		{"duplicate nested key", goodEnvelope + "agentPolicy:\n  a: 1\n  a: 2\n", ReasonDuplicateKey, "agentPolicy.a"},
		{"non-string key", goodEnvelope + "agentPolicy:\n  1: x\n", ReasonInvalidField, "agentPolicy"},
		{"anchor", goodEnvelope + "agentPolicy:\n  a: &x 1\n  b: *x\n", ReasonInvalidField, "agentPolicy.a"},
		{"alias", goodEnvelope + "agentPolicy:\n  a: 1\n  b: *x\n", ReasonParse, "values.yml"},
		{"merge key", goodEnvelope + "agentPolicy:\n  a: {k: 1}\n  b:\n    <<: {k: 2}\n", ReasonInvalidField, "agentPolicy.b"},
		{"nesting too deep", goodEnvelope + "agentPolicy:\n  a: " + strings.Repeat("[", 100) + strings.Repeat("]", 100) + "\n", ReasonInvalidField, "…"},
		{"yaml 1.1 boolean", goodEnvelope + "agentPolicy:\n  a: yes\n", ReasonInvalidField, "agentPolicy.a"},
		{"NaN", goodEnvelope + "agentPolicy:\n  a: .nan\n", ReasonInvalidField, "agentPolicy.a"},
		{"integer beyond 2^53", goodEnvelope + "agentPolicy:\n  a: 9007199254740993\n", ReasonInvalidField, "agentPolicy.a"},
		{"binary", goodEnvelope + "agentPolicy:\n  a: !!binary aGVsbG8=\n", ReasonInvalidField, "agentPolicy.a"},
		{"another audience's namespace", goodEnvelope + "agentPolicy: {}\nknowledgePolicy: {}\n", ReasonUnknownField, "knowledgePolicy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseValues([]byte(tc.doc), "agent")
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			var ve *VerificationError
			if !errors.As(err, &ve) || ve.Reason != tc.reason || !strings.HasSuffix(ve.Field, tc.field) {
				t.Fatalf("got %v, want %s at %s", err, tc.reason, tc.field)
			}
		})
	}
}

func FuzzParseValues(f *testing.F) {
	f.Add([]byte(goodEnvelope + "agentPolicy:\n  a: 1\n"))
	f.Add([]byte("a: [1, {b: c}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := parseValues(b, "agent")
		if err == nil && doc.Namespace == nil {
			t.Fatal("parsed without a namespace")
		}
		var ve *VerificationError
		if err != nil && !errors.As(err, &ve) {
			t.Fatalf("error is not a *VerificationError: %v", err)
		}
	})
}
