package planreport_test

import (
	"strings"
	"testing"
	"testing/fstest"
)

// TestAnAgentTargetChangeIsTheCauseOfItsBindings: an Agent's Target document
// is no input of the Gateway's and Knowledge service's artifacts, but its
// edit, addition or removal changes the publications they accept for the
// Agent. The plan named no cause for them, and compared the publications by
// position: the publication kept (now the previous one) read as its
// publicationId changing.
func TestAnAgentTargetChangeIsTheCauseOfItsBindings(t *testing.T) {
	const knowledge = "com.networknt.knowledge-1.0.0"
	base := fixtureFS(t)
	head := fixtureFS(t)
	edit(t, head, "targets/dev/tech-support.yaml", "leaseProfile: local-demo", "leaseProfile: local-demo\n  settings:\n    extra: 1")
	r := report(t, base, head)
	for _, svc := range []string{gateway, knowledge} {
		c := target(t, r, svc)
		if len(c.Because) != 1 || c.Because[0].Kind != "Target" || c.Because[0].Name != "dev-tech-support" ||
			c.Because[0].File != "targets/dev/tech-support.yaml" || c.Because[0].Change != "changed" || c.Because[0].Line != 14 {
			t.Errorf("%s: because %+v, want Target dev-tech-support changed (targets/dev/tech-support.yaml:14)", svc, c.Because)
		}
		if len(c.Values) != 1 || c.Values[0].Old != nil || !strings.HasSuffix(c.Values[0].Path, "/publications/0") ||
			!strings.Contains(string(c.Values[0].New), `"publicationId"`) {
			t.Errorf("%s: values %+v, want one publication added and the kept one not shown as changed", svc, c.Values)
		}
	}

	// A second Target of the Agent: its file is named as added.
	head = fixtureFS(t)
	doc := string(head["targets/dev/tech-support.yaml"].Data)
	doc = strings.Replace(strings.Replace(doc, "name: dev-tech-support", "name: dev-tech-support-2", 1), "agent-tech-support-1.0.0", "agent-tech-support-2.0.0", 1)
	head["targets/dev/tech-support-2.yaml"] = &fstest.MapFile{Data: []byte(doc), Mode: 0o644}
	c := target(t, report(t, base, head), gateway)
	if len(c.Because) != 1 || c.Because[0].Name != "dev-tech-support-2" || c.Because[0].Change != "added" {
		t.Errorf("gateway because %+v, want Target dev-tech-support-2 added", c.Because)
	}

	// An Agent document change is still named as the Agent (its Target
	// document did not change).
	head = fixtureFS(t)
	edit(t, head, "agents/tech-support.yaml", "maxOutputTokens: 2048", "maxOutputTokens: 1024")
	c = target(t, report(t, base, head), gateway)
	if len(c.Because) != 1 || c.Because[0].Kind != "Agent" {
		t.Errorf("gateway because %+v, want Agent tech-support only", c.Because)
	}
}
