package compiler

import (
	"errors"
	"strings"
	"testing"
)

func TestNamesMustBeNFC(t *testing.T) {
	const e = "e\u0301" // decomposed é
	tests := []struct {
		kind, yaml, field string // field "" means accepted
	}{
		{KindTarget, "metadata: {name: dev-caf" + e + "}", "metadata.name"},
		{KindRepository, "metadata: {name: caf" + e + "}", "metadata.name"},
		{KindTarget, "metadata: {name: dev-caf\u00e9}\nspec: {subject: {name: caf\u00e9}}", ""},
		{KindTarget, "metadata: {name: t}\nspec: {subject: {kind: Agent, name: caf" + e + "}}", "spec.subject.name"},
		{KindGateway, "metadata: {name: g}\nspec: {issuers: [{audiences: [a]}, {audiences: [b, caf" + e + "]}]}", "spec.issuers[1].audiences[1]"},
		{KindGateway, "metadata: {name: g}\nspec: {issuers: [{requiredClaims: [caf" + e + "]}]}", "spec.issuers[0].requiredClaims[0]"},
		{KindAgent, "metadata: {name: a}\nspec: {gateway: {delegation: {scopes: [caf" + e + "]}}}", "spec.gateway.delegation.scopes[0]"},
		{KindWorkflow, "metadata: {name: w}\nspec: {versions: [{approvals: [caf" + e + "]}]}", "spec.versions[0].approvals[0]"},
		{KindEnvironment, "metadata: {name: dev}\nspec: {freezeWindows: [{name: caf" + e + "}]}", "spec.freezeWindows[0].name"},
		{KindAgent, "metadata: {name: a}\nspec: {prompt: caf" + e + "}", ""}, // free text, not a name
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.field, func(t *testing.T) {
			d := parseDoc(t, "x.yaml", tt.yaml)
			err := checkNamesNFC(&source{Kind: tt.kind, File: "x.yaml", Doc: d}, d.Value)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *SourceError
			if !errors.As(err, &se) || se.Field != tt.field || !strings.Contains(err.Error(), `is not in Unicode NFC (composed) form; write "`) {
				t.Fatalf("got %v, want a refusal at %s", err, tt.field)
			}
		})
	}
}
