package compiler_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
)

// TestIdentityGrammarAtCompile: identities that publish could not push are
// refused at compile time with file:line:field, in any environment.
func TestIdentityGrammarAtCompile(t *testing.T) {
	label := strings.Repeat("h", 62)
	tests := []struct {
		name, old, new string
		line           int
		field, msg     string
	}{
		{"upper-case serviceId", "serviceId: com.networknt.agent-account-1.0.0", "serviceId: Com.networknt.agent-account-1.0.0", 7, "spec.serviceId", "lowercase"},
		{"trailing dot", "serviceId: com.networknt.agent-account-1.0.0", "serviceId: com.networknt.agent-account-1.0.0.", 7, "spec.serviceId", "must end"},
		{"trailing hyphen", "serviceId: com.networknt.agent-account-1.0.0", "serviceId: com.networknt.agent-account-", 7, "spec.serviceId", "must end"},
		{"double dot", "serviceId: com.networknt.agent-account-1.0.0", "serviceId: com..networknt", 7, "spec.serviceId", "between"},
		{"long serviceId", "serviceId: com.networknt.agent-account-1.0.0", "serviceId: " + strings.Repeat("s", 81), 7, "spec.serviceId", "at most 80"},
		{"252-character host", "host: dev.lightapi.net", "host: " + label + "." + label + "." + label + "." + label[:61], 6, "spec.host", "at most 80"},
		{"other environment", "envTag: dev", "envTag: qa-", 8, "spec.envTag", "must end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyRepo(t)
			edit(t, filepath.Join(dir, "targets/dev/account.yaml"), tt.old, tt.new)
			_, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "dev", CreatedAt: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
			var se *compiler.SourceError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *compiler.SourceError", err)
			}
			if se.File != "targets/dev/account.yaml" || se.Line != tt.line || se.Field != tt.field || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("got %s:%d:%s %q, want targets/dev/account.yaml:%d:%s containing %q", se.File, se.Line, se.Field, err, tt.line, tt.field, tt.msg)
			}
		})
	}
	if _, err := compiler.Compile(context.Background(), os.DirFS(copyRepo(t)), compiler.Options{EnvTag: "Dev"}); err == nil || !strings.Contains(err.Error(), "lowercase") {
		t.Errorf("compile --env Dev: got %v, want the grammar refusal", err)
	}
}
