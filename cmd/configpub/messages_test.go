package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMistakeMessages checks that the common mistakes get a message naming
// what is wrong and what to do.
func TestMistakeMessages(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	host := strings.TrimPrefix(plain.URL, "http://")
	keys := t.TempDir()
	t.Setenv("COSIGN_PASSWORD", "right")
	if out, err := runCLI("keygen", "--out", keys); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	fixture := copyDir(t, "../../fixtures/policy-repo")
	noTargets := copyDir(t, "../../fixtures/policy-repo")
	if err := os.RemoveAll(filepath.Join(noTargets, "targets", "dev")); err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("0", 64)

	tests := []struct {
		name     string
		password string
		args     []string
		want     []string
		dontWant string
	}{
		{"missing repository", "right", []string{"compile", "--repo", missing, "--env", "dev", "--check"},
			[]string{"policy repository " + missing, "no such file or directory"}, "stat ."},
		{"plan on a missing repository", "right", []string{"plan", "--repo", missing, "--env", "dev"},
			[]string{"policy repository " + missing, "no such file or directory"}, "stat ."},
		{"unknown environment", "right", []string{"compile", "--repo", fixture, "--env", "staging", "--check", "--created-at", "2026-01-01T00:00:00Z"},
			[]string{`no environment "staging"`, "dev, prod"}, "environments/staging.yaml"},
		{"environment whose Target documents were all deleted", "right", []string{"compile", "--repo", noTargets, "--env", "dev", "--created-at", "2026-10-01T00:00:00Z"},
			[]string{`environment "dev" (environments/dev.yaml) has no Target document`, "Removing an environment"}, ""},
		{"wrong key password", "wrong", []string{"publish", "--repo", fixture, "--env", "dev", "--registry", host + "/policy", "--key", filepath.Join(keys, "cosign.key")},
			[]string{"COSIGN_PASSWORD", "password the key was created with"}, ""},
		{"plain HTTP registry without --plain-http", "right", []string{"pull", host + "/policy/x@" + digest, "--out", filepath.Join(t.TempDir(), "values.yml")},
			[]string{"add --plain-http"}, ""},
		{"verify-oci of a plain HTTP registry without --plain-http", "right", []string{"verify-oci", host + "/policy/x@" + digest, "--trust-key", filepath.Join(keys, "cosign.pub")},
			[]string{"add --plain-http"}, ""},
		{"publish to a plain HTTP registry without --plain-http", "right", []string{"publish", "--repo", fixture, "--env", "dev", "--registry", host + "/policy", "--key", filepath.Join(keys, "cosign.key")},
			[]string{"add --plain-http"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("COSIGN_PASSWORD", tt.password)
			_, err := runCLI(tt.args...)
			if err == nil {
				t.Fatalf("configpub %v succeeded", tt.args)
			}
			if code := exitCode(err); code != exitRefused {
				t.Errorf("exit code %d, want %d", code, exitRefused)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not contain %q", err, w)
				}
			}
			if tt.dontWant != "" && strings.Contains(err.Error(), tt.dontWant) {
				t.Errorf("message %q still contains %q", err, tt.dontWant)
			}
		})
	}
	// A reference in another form (here the one publish printed before it
	// printed pasteable references) is a usage error naming the form wanted.
	_, err := runCLI("pull", host+"/policy/x:r2 "+digest, "--out", filepath.Join(t.TempDir(), "values.yml"))
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "want REPOSITORY@sha256:<hex>, as publish prints it") {
		t.Errorf("pull of a tag-and-digest line: %v (exit %d)", err, exitCode(err))
	}
}
