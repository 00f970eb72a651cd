package compiler_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
)

func TestValidateArtifact(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(goldenDir, "*", "*", "*", "values.yml"))
	if len(files) < 8 {
		t.Fatalf("found %d golden artifacts", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := compiler.ValidateArtifact(f, b, "")
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if r.ContentDigest != r.Envelope.ContentDigest {
			t.Errorf("%s: content digest %s, envelope %s", f, r.ContentDigest, r.Envelope.ContentDigest)
		}
	}
	tampered := []struct {
		name, file, old, new, want string
		is                         error
	}{
		{"namespace edited", "dev/dev.lightapi.net/com.networknt.agent-account-1.0.0/values.yml", "maxOutputTokens: 4096", "maxOutputTokens: 4095", "contentDigest", bundle.ErrDigestMismatch},
		{"inventory edited", "dev/dev.lightapi.net/com.networknt.knowledge-1.0.0/values.yml", "tombstones: []\n    digest: \"sha256:", "tombstones: []\n    digest: \"sha256:0", "", nil},
		{"envelope reordered", "dev/dev.lightapi.net/com.networknt.light-gateway-1.0.0/values.yml", "  releaseVersion: 1\n", "", "", nil},
		{"window inverted", "prod/dev.lightapi.net/com.networknt.agent-advisor-1.0.0/values.yml", "validFrom: \"2026-08-13T14:00:00Z\"", "validFrom: \"2099-08-13T14:00:00Z\"", "validFrom", compiler.ErrInvalidArtifact},
		{"wrong audience", "dev/dev.lightapi.net/com.networknt.agent-account-1.0.0/values.yml", "audience: \"agent\"", "audience: \"gateway\"", "", nil},
	}
	for _, tt := range tampered {
		t.Run(tt.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(goldenDir, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			s := string(b)
			if !strings.Contains(s, tt.old) {
				t.Fatalf("%q not in %s", tt.old, tt.file)
			}
			_, err = compiler.ValidateArtifact(tt.file, []byte(strings.Replace(s, tt.old, tt.new, 1)), "")
			if err == nil {
				t.Fatal("tampered artifact accepted")
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want it to mention %s", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}
