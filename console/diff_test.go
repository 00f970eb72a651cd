package console

import "testing"

func TestDiffMasksSecretsAndCountsTheEnvelope(t *testing.T) {
	old := []byte(`runtimePolicy:
  releaseVersion: 1
agentPolicy:
  limits: {requestsPerMinute: 120}
  apiKeyRef: "vault://secret/a#k"
  dbPassword: "vault://secret/db#pw"
  endpoint: "https://api.example/v1"
  note: plain
`)
	cur := []byte(`runtimePolicy:
  releaseVersion: 2
agentPolicy:
  limits: {requestsPerMinute: 60}
  apiKeyRef: "vault://secret/b#k"
  dbPassword: "vault://secret/db2#pw"
  endpoint: "https://user:hunter22@api.example/v1"
  note: "plain text, changed"
  tags: [a]
`)
	changes, envelope, err := diffValues(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Path: "agentPolicy.apiKeyRef", Old: secretRef, New: secretRef},
		{Path: "agentPolicy.dbPassword", Old: secretRef, New: secretRef},
		{Path: "agentPolicy.endpoint", Old: `"https://api.example/v1"`, New: secretRef},
		{Path: "agentPolicy.limits.requestsPerMinute", Old: "120", New: "60"},
		{Path: "agentPolicy.note", Old: `"plain"`, New: `"plain text, changed"`},
		{Path: "agentPolicy.tags[0]", Old: "", New: `"a"`},
	}
	if len(changes) != len(want) {
		t.Fatalf("got %d changes %+v, want %d", len(changes), changes, len(want))
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Errorf("change %d: got %+v, want %+v", i, changes[i], want[i])
		}
	}
	if envelope != 1 {
		t.Errorf("envelope changes: got %d, want 1", envelope)
	}
	if _, _, err := diffValues([]byte("a: [unclosed"), cur); err == nil {
		t.Errorf("unparseable previous values: got no error")
	}
}
