package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	yaml "gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/schemas"
)

func loadYAML(t *testing.T, p string) any {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	// Normalize through JSON (numbers become json.Number, as the validator expects).
	jb, _ := json.Marshal(v)
	dec := json.NewDecoder(bytes.NewReader(jb))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGoldenArtifactsValidate(t *testing.T) {
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../fixtures/golden/*/*/*/values.yml")
	if len(files) < 8 {
		t.Fatalf("found %d golden artifacts", len(files))
	}
	for _, f := range files {
		doc := loadYAML(t, f)
		aud := doc.(map[string]any)["runtimePolicy"].(map[string]any)["audience"].(string)
		if err := set.Validate("artifact/"+aud, doc); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		rules, err := schemas.RulesFor("artifact/" + aud)
		if err != nil {
			t.Fatal(err)
		}
		if p := rules.Check(doc); len(p) > 0 {
			t.Errorf("%s: %v", f, p)
		}
	}
}

func TestSourceFixturesValidate(t *testing.T) {
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../fixtures/policy-repo/*/*.yaml")
	more, _ := filepath.Glob("../fixtures/policy-repo/*/*/*.yaml")
	files = append(append(files, more...), "../fixtures/policy-repo/configpub.yaml")
	for _, f := range files {
		if strings.Contains(f, "/releases/") {
			continue
		}
		doc := loadYAML(t, f)
		kind := doc.(map[string]any)["kind"].(string)
		if err := set.Validate("source/"+strings.ToLower(kind), doc); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestAgentSchemaListsMissingMandatoryProperties: the 21-property bootstrap
// snapshot is refused with a bounded list of missing mandatory names.
func TestAgentSchemaListsMissingMandatoryProperties(t *testing.T) {
	set, _ := schemas.Default()
	err := set.Validate("artifact/agent", loadYAML(t, "../fixtures/negative/bootstrap-only-agent/values.yml"))
	var ve *schemas.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v, want *ValidationError", err)
	}
	if len(ve.Problems) != schemas.MaxProblems || ve.Omitted == 0 {
		t.Fatalf("got %d problems + %d omitted, want %d + more", len(ve.Problems), ve.Omitted, schemas.MaxProblems)
	}
	total := len(ve.Problems) + ve.Omitted
	// 18 envelope members + every mandatory agentPolicy leaf.
	if total < 40 {
		t.Errorf("got %d missing properties, want at least 40", total)
	}
	if !strings.Contains(err.Error(), "/agentPolicy/definition/id: missing required property") {
		t.Errorf("got %q", err)
	}
}

func TestRulesRefuseBadIdentityAndWindow(t *testing.T) {
	doc := loadYAML(t, "../fixtures/golden/dev/dev.lightapi.net/com.networknt.agent-account-1.0.0/values.yml").(map[string]any)
	rp := doc["runtimePolicy"].(map[string]any)
	rp["expiresAt"] = rp["validFrom"]
	doc["agentPolicy"].(map[string]any)["host"] = "other.example.com"
	rules, _ := schemas.RulesFor("artifact/agent")
	p := rules.Check(doc)
	if len(p) != 2 {
		t.Fatalf("got %v, want an identity and a window problem", p)
	}
}

// TestEnvelopeSchemaOrderIsNormative: the envelope schema lists its members
// in the order of bundle.RuntimePolicy.
func TestEnvelopeSchemaOrderIsNormative(t *testing.T) {
	raw, err := schemas.Raw("artifact/envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Properties))
	var order []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch x := tok.(type) {
		case json.Delim:
			if x == '{' || x == '[' {
				depth++
			} else {
				depth--
			}
		case string:
			if depth == 1 {
				order = append(order, x)
				// skip the value
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var want []string
	rt := reflect.TypeOf(bundle.RuntimePolicy{})
	for i := 0; i < rt.NumField(); i++ {
		want = append(want, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("got %v, want %v", order, want)
	}
	if len(doc.Required) != len(want) {
		t.Errorf("%d required, want all %d", len(doc.Required), len(want))
	}
}
