package compiler

import (
	"slices"
	"testing"
)

// TestPlanComparesPublicationsByIdentity: accepted publications compare by
// agent and each agent's publications by publicationId. Compared by
// position, a publication inserted before the one kept (the kept one is
// now the previous publication, sorted after the new one) read as the kept
// one's publicationId and policyDigest changing, and an Agent bound before
// the others as every later Agent's entry changing.
func TestPlanComparesPublicationsByIdentity(t *testing.T) {
	tests := []struct {
		name, old, new          string
		added, removed, changed []string
	}{
		{"a publication added before the kept one",
			`[{agent: a, publications: [{publicationId: "2", policyDigest: dx}]}]`,
			`[{agent: a, publications: [{publicationId: "1", policyDigest: dy}, {publicationId: "2", policyDigest: dx}]}]`,
			[]string{"/p/0/publications/0"}, nil, nil},
		{"the previous publication dropped, a new one added",
			`[{agent: a, publications: [{publicationId: "2", policyDigest: dx}, {publicationId: "3", policyDigest: dw}]}]`,
			`[{agent: a, publications: [{publicationId: "1", policyDigest: dy}, {publicationId: "2", policyDigest: dx}]}]`,
			[]string{"/p/0/publications/0"}, []string{"/p/0/publications/1"}, nil},
		{"an agent bound before the others",
			`[{agent: b, publications: []}, {agent: c, publications: []}]`,
			`[{agent: a, publications: []}, {agent: b, publications: []}, {agent: c, publications: []}]`,
			[]string{"/p/0"}, nil, nil},
		{"a publication's digest changed in place",
			`[{agent: a, publications: [{publicationId: "1", policyDigest: dx}]}]`,
			`[{agent: a, publications: [{publicationId: "1", policyDigest: dy}]}]`,
			nil, nil, []string{"/p/0/publications/0/policyDigest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d differ
			d.diff("/p", val(t, tt.old), val(t, tt.new))
			if !slices.Equal(d.added, tt.added) || !slices.Equal(d.removed, tt.removed) || !slices.Equal(d.changed, tt.changed) {
				t.Errorf("added %v removed %v changed %v, want %v %v %v", d.added, d.removed, d.changed, tt.added, tt.removed, tt.changed)
			}
		})
	}
}
