package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestRegistryPrefixIsChecked: every --registry prefix (publish, promote,
// registry attach, lease renew --attach) that no artifact reference can be
// made under is a usage error naming --registry, before anything is
// compiled, pushed or read, and credentials in it are never repeated.
// publish took 'u:s3cr3t@host/x' and 'bad ref!!' to the push and failed
// there, exit 1, echoing the password; promote refused an '@' quoting it.
func TestRegistryPrefixIsChecked(t *testing.T) {
	db := "--database=postgres://configpub@127.0.0.1:1/none"
	verbs := map[string][]string{
		"publish":         {"publish", "--repo", t.TempDir(), "--env", "dev", "--key", "cosign.key"},
		"promote":         {"promote", "--repo", t.TempDir(), "--env", "dev", "--key", "cosign.key", db},
		"registry attach": {"registry", "attach", "--env", "dev", db},
		"lease renew":     {"lease", "renew", "--env", "dev", "--key", "cosign.key", "--attach", db},
	}
	for _, tc := range []struct{ prefix, want string }{
		{"u:s3cr3t@registry.example.com/policy", "--registry (not repeated: it holds an '@')"},
		{"https://registry.example.com/policy", `--registry "https://registry.example.com/policy": want HOST[:PORT]/PREFIX without a scheme`},
		{"bad ref!!/policy", `--registry "bad ref!!/policy": want HOST[:PORT]/PREFIX: `},
		{"registry.example.com/Policy", `--registry "registry.example.com/Policy": want HOST[:PORT]/PREFIX: `},
	} {
		for name, args := range verbs {
			out, err := runCLI(append(append([]string(nil), args...), "--registry", tc.prefix)...)
			if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("%s --registry %q: exit %d (%v), want 2 naming %q\n%s", name, tc.prefix, code, err, tc.want, out)
			}
			if strings.Contains(fmt.Sprint(err)+out, "s3cr3t") {
				t.Errorf("%s --registry %q: the password is echoed: %v", name, tc.prefix, err)
			}
		}
	}
}

// TestPublishConcurrencyIsChecked: publish --concurrency 0 or less is a
// usage error naming it; the registry client read it as its default, 8.
func TestPublishConcurrencyIsChecked(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "")
	for _, n := range []string{"0", "-3"} {
		out, err := runCLI("publish", "--repo", t.TempDir(), "--env", "dev", "--key", "cosign.key",
			"--registry", "registry.example.com/policy", "--concurrency", n)
		if code := exitCode(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), "--concurrency "+n+": want a positive number") {
			t.Errorf("--concurrency %s: exit %d (%v), want 2 naming it\n%s", n, code, err, out)
		}
	}
}
