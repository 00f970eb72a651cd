package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// TestCLIOutputDocumented: every JSON field of the reports these verbs
// print is named in docs/cli-output.md under the verb's heading.
func TestCLIOutputDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli-output.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range []struct {
		heading string
		report  any
	}{
		{"## promote", promote.Result{}},
		{"## promote", review.Review{}},
		{"## promote", review.Actor{}},
		{"## promote", review.Trailer{}},
		{"## promote", registry.Result{}},
		{"## promote", promoter.StageResult{}},
		{"## promote", promoter.ActivationResult{}},
		{"## publish", publishReport{}},
		{"## publish", publishedArtifact{}},
		{"## pull", pullReport{}},
		{"## verify-oci", verifyReport{}},
		{"## verify-oci", verifiedTarget{}},
		{"## validate", validateReport{}},
		{"## init", initReport{}},
		{"## keygen and token keygen", keyFilesReport{}},
		{"## db migrate", migrateReport{}},
		{"## db gc", gcReport{}},
		{"## db gc", gcRenewals{}},
		{"## db keys", keysReport{}},
		{"## db keys", signingKeyReport{}},
		{"## registry attach", attachReport{}},
		{"## registry republish", promote.RepublishResult{}},
		{"## registry republish", republishReport{}},
		{"## revoke", promoter.Revocation{}},
	} {
		heading, v := c.heading, c.report
		i := strings.Index(doc, heading+"\n")
		if i < 0 {
			t.Errorf("docs/cli-output.md has no %q section", heading)
			continue
		}
		section := doc[i+len(heading):]
		if j := strings.Index(section, "\n## "); j >= 0 {
			section = section[:j]
		}
		rt := reflect.TypeOf(v)
		for k := 0; k < rt.NumField(); k++ {
			name, _, _ := strings.Cut(rt.Field(k).Tag.Get("json"), ",")
			if name == "-" || (name == "" && rt.Field(k).Anonymous) {
				continue // not printed, or an embedded report listed on its own
			}
			if !strings.Contains(section, "`"+name+"`") {
				t.Errorf("%s: field %q of %s is not documented", heading, name, rt.Name())
			}
		}
	}
}
