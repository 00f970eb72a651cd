package compiler

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

func val(t *testing.T, y string) *render.Value {
	t.Helper()
	v, err := yamlstrict.ParseValue("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMergeSettings(t *testing.T) {
	tests := []struct {
		name, base, override, want string
	}{
		{"maps merge", "a: {x: 1, y: 2}", "a: {y: 3, z: 4}", `{"a.x":1,"a.y":3,"a.z":4}`},
		{"lists replace", "a: [1, 2, 3]", "a: [9]", `{"a":[9]}`},
		{"null removes", "a: {x: 1, y: 2}\nb: 1", "a: {x: null}\nb: null", `{"a.y":2}`},
		{"empty map kept distinct", "a: {x: 1}", "b: {}", `{"a.x":1,"b":{}}`},
		{"false and zero are present", "a: true\nb: 5", "a: false\nb: 0", `{"a":false,"b":0}`},
		{"empty string present", "a: x", "a: \"\"", `{"a":""}`},
		{"empty list present", "a: [1]", "a: []", `{"a":[]}`},
		{"scalar replaces map", "a: {x: 1}", "a: 2", `{"a":2}`},
		{"map replaces scalar", "a: 2", "a: {x: 1, y: null}", `{"a.x":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := render.Canonical(flatten(mergeSettings(val(t, tt.base), val(t, tt.override))))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestDeriveID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a := deriveID(idSnapshot, "h", "s", "e", "sha256:x")
	if !re.MatchString(a) {
		t.Errorf("%s is not a lowercase UUIDv8", a)
	}
	if b := deriveID(idSnapshot, "h", "s", "e", "sha256:x"); a != b {
		t.Errorf("not deterministic: %s vs %s", a, b)
	}
	if b := deriveID(idPolicySnapshot, "h", "s", "e", "sha256:x"); a == b {
		t.Errorf("domains not separated")
	}
	if b := deriveID(idSnapshot, "hs", "", "e", "sha256:x"); a == b {
		t.Errorf("parts not separated")
	}
}

func TestReservedSettingKeyIgnoresCaseAndSeparators(t *testing.T) {
	tests := []struct {
		name, key, want string
	}{
		{"exact", "runtimePolicy", "runtimePolicy"},
		{"capitalised", "RuntimePolicy", "runtimePolicy"},
		{"lower case", "runtimepolicy", "runtimePolicy"},
		{"kebab case", "runtime-policy", "runtimePolicy"},
		{"snake case", "AGENT_POLICY", "agentPolicy"},
		{"gateway namespace", "Gateway-Policy", "gatewayPolicy"},
		{"knowledge namespace", "knowledge_policy", "knowledgePolicy"},
		{"longer name", "runtimePolicyOverrides", ""},
		{"ordinary setting", "logging", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reservedSettingKey(tt.key); got != tt.want {
				t.Errorf("reservedSettingKey(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}

func TestOverrideMustKeepTheBaseSpelling(t *testing.T) {
	tests := []struct {
		name, base, override, field string // field "" means accepted
	}{
		{"same spelling merges", "logging: {level: DEBUG}", "logging: {level: TRACE}", ""},
		{"new key", "logging: {level: DEBUG}", "Tracing: {on: true}", ""},
		{"top level in another case", "logging: {level: DEBUG}", "Logging: {level: TRACE}", "spec.settings.Logging"},
		{"nested in another case", "logging: {level: DEBUG}", "logging: {LEVEL: TRACE}", "spec.settings.logging.LEVEL"},
		{"separators", "server: {httpsPort: 8443}", "server: {https_port: 9443}", "spec.settings.server.https_port"},
		{"a null in another spelling would not remove the key", "logging: {level: DEBUG}", "Logging: null", "spec.settings.Logging"},
		{"replaced subtree is not compared", "logging: 1", "logging: {level: x}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := &source{File: "environments/dev.yaml", Doc: parseDoc(t, "environments/dev.yaml", "spec:\n  settings:\n    agent:\n"+indent(tt.base, 6))}
			tgt := &source{File: "targets/t.yaml", Doc: parseDoc(t, "targets/t.yaml", "spec:\n  settings:\n"+indent(tt.override, 4))}
			err := checkOverrideSpelling(env, []string{"spec", "settings", "agent"}, val(t, tt.base), tgt, []string{"spec", "settings"}, val(t, tt.override))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *SourceError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *SourceError at %s", err, tt.field)
			}
			if se.File != "targets/t.yaml" || se.Field != tt.field || !strings.Contains(err.Error(), "of environments/dev.yaml:4") || !strings.Contains(err.Error(), "spelled differently") {
				t.Errorf("got %v, want it at targets/t.yaml %s naming environments/dev.yaml:4", err, tt.field)
			}
		})
	}
}

func parseDoc(t *testing.T, file, y string) *yamlstrict.Doc {
	t.Helper()
	d, err := yamlstrict.ParseSource(file, []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// indent writes flow-style YAML y as the value of a block at n spaces.
func indent(y string, n int) string {
	return strings.Repeat(" ", n) + strings.ReplaceAll(y, "\n", "\n"+strings.Repeat(" ", n)) + "\n"
}
