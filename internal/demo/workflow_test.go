package demo

import (
	"testing"

	"github.com/configpub/configpub/bundle"
)

func TestCheckWorkflowViews(t *testing.T) {
	m := &bundle.Manifest{Workflows: []bundle.WorkflowVersion{
		{Name: "wf", Version: "1.0.0", State: "PUBLISHED"}, {Name: "wf", Version: "1.1.0", State: "DRAFT"},
	}}
	head := "WORKFLOW VIEW  RELEASE  STATE  VIEW DIGEST\n"
	for _, tc := range []struct {
		status string
		ok     bool
	}{
		{head + "wf@1.0.0  1  PINNABLE  sha256:x\n", true},
		{head + "wf@1.0.0  1  REVOKED  sha256:x\n", false},
		{head, false},
		{head + "wf@1.0.0  1  PINNABLE  sha256:x\nwf@1.1.0  1  PINNABLE  sha256:y\n", false},
	} {
		p, d, err := checkWorkflowViews([]byte(tc.status), m)
		if (err == nil) != tc.ok || tc.ok && (p != 1 || d != 1) {
			t.Errorf("%q: %d, %d, %v; want ok=%v", tc.status, p, d, err, tc.ok)
		}
	}
}
