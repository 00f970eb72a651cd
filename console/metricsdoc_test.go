package console

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsAreDocumented checks the README's console metrics table
// against what the console's /metrics can serve, both ways: every metric
// the publication collector describes and every request metric is a row,
// and every row names a metric the console has.
func TestMetricsAreDocumented(t *testing.T) {
	t.Parallel()
	has := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	(&publicationCollector{}).Describe(ch)
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		has[m[1]] = true
	}
	reg := prometheus.NewRegistry()
	m := newHTTPMetrics(reg, newHub())
	m.requests.WithLabelValues("home", "200").Inc()
	m.duration.WithLabelValues("home").Observe(0.01)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		has[mf.GetName()] = true
	}

	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| metric | type | labels | meaning |")
	if !ok {
		t.Fatal("README has no metrics table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	documented := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "|"), "|")
		for _, name := range regexp.MustCompile("`(configpub_[a-z_]+)`").FindAllStringSubmatch(first, -1) {
			documented[name[1]] = true
		}
	}
	for name := range has {
		if !documented[name] {
			t.Errorf("the console serves %s, which the README's metrics table does not document", name)
		}
	}
	for name := range documented {
		if !has[name] {
			t.Errorf("the README's metrics table documents %s, which the console does not serve", name)
		}
	}
}

// lintMetrics runs promlint over a /metrics answer and reports each
// problem of a configpub_ family.
func lintMetrics(t *testing.T, body string) {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "configpub_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	if len(families) == 0 {
		t.Fatal("/metrics is empty")
	}
}
