package demo

import (
	"fmt"
	"strings"

	"github.com/configpub/configpub/bundle"
)

// checkWorkflowViews checks the status output of the current release m:
// every PUBLISHED workflow version is listed PINNABLE, no DRAFT is listed.
func checkWorkflowViews(status []byte, m *bundle.Manifest) (pinnable, drafts int, err error) {
	lines := strings.Split(string(status), "\n")
	listed := func(key string) string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) >= 3 && f[0] == key {
				return f[2]
			}
		}
		return ""
	}
	for _, w := range m.Workflows {
		key := w.Name + "@" + w.Version
		got := listed(key)
		switch {
		case w.State == "PUBLISHED" && got != "PINNABLE":
			return 0, 0, fmt.Errorf("demo: status lists workflow view %s as %q, want PINNABLE", key, got)
		case w.State != "PUBLISHED" && got != "":
			return 0, 0, fmt.Errorf("demo: status lists a view of %s version %s", w.State, key)
		case w.State == "PUBLISHED":
			pinnable++
		default:
			drafts++
		}
	}
	return pinnable, drafts, nil
}
