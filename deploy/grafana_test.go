package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboardUsesDocumentedMetrics parses the console dashboard and
// checks that every metric its queries use is one the README documents (the
// console's /metrics), and that it covers the publication signals.
func TestGrafanaDashboardUsesDocumentedMetrics(t *testing.T) {
	b, err := os.ReadFile("grafana/configpub-console.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`configpub_[a-z_]+`)
	used := map[string]bool{}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range name.FindAllString(q.Expr, -1) {
				m = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")
				used[m] = true
				if !strings.Contains(string(readme), "`"+m+"`") {
					t.Errorf("panel %q uses %s, which the README does not document", p.Title, m)
				}
			}
		}
	}
	for _, m := range []string{"configpub_publication_duration_seconds", "configpub_publication_failures_total",
		"configpub_environment_staged_release", "configpub_snapshot_rejections_total", "configpub_ack_lag_seconds",
		"configpub_digest_divergence_targets", "configpub_rejected_publications", "configpub_rollbacks_total",
		"configpub_revocations_total", "configpub_environment_current_release_activatable_until_seconds"} {
		if !used[m] {
			t.Errorf("the dashboard has no panel for %s", m)
		}
	}
}
