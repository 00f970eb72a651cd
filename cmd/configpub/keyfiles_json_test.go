package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/cosignkey"
)

// TestFileWritingVerbsOutputJSON: init, keygen and token keygen with -o json
// print the files they wrote (paths that exist, never key material) under
// the documented field names.
func TestFileWritingVerbsOutputJSON(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "policy")
	out, err := runCLI("init", dir, "--env", "staging", "-o", "json")
	if err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	var ir struct {
		Dir    string   `json:"dir"`
		EnvTag string   `json:"envTag"`
		Files  []string `json:"files"`
	}
	decodeStrict(t, out, &ir)
	if ir.EnvTag != "staging" || len(ir.Files) == 0 {
		t.Fatalf("init -o json: %+v", ir)
	}
	for _, f := range ir.Files {
		if _, err := os.Stat(filepath.Join(ir.Dir, filepath.FromSlash(f))); err != nil {
			t.Errorf("init reported %s: %v", f, err)
		}
	}

	type keyFiles struct {
		PrivateKey string `json:"privateKey"`
		PublicKey  string `json:"publicKey"`
		JWKS       string `json:"jwks"`
		KeyID      string `json:"keyId"`
	}
	t.Setenv(cosignkey.PasswordEnv, "pw")
	for _, args := range [][]string{{"keygen"}, {"token", "keygen"}} {
		out, err := runCLI(append(args, "--out", t.TempDir(), "-o", "json")...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if strings.Contains(out, "PRIVATE KEY") {
			t.Fatalf("%v printed key material", args)
		}
		var k keyFiles
		decodeStrict(t, out, &k)
		second := k.PublicKey
		if args[0] == "token" {
			second = k.JWKS
		}
		if k.KeyID == "" || k.PrivateKey == "" || second == "" {
			t.Fatalf("%v -o json: %+v", args, k)
		}
		for _, p := range []string{k.PrivateKey, second} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%v reported %s: %v", args, p, err)
			}
		}
	}
}
