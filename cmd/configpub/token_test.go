package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/auth"
)

// runTokenCLI runs the CLI in process and returns its output and exit code.
func runTokenCLI(args ...string) (string, int) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		out.WriteString(err.Error()) // as main prints it
	}
	return out.String(), exitCode(err)
}

func TestTokenKeygenAndMint(t *testing.T) {
	dir := t.TempDir()
	out, code := runTokenCLI("token", "keygen", "--out", dir)
	if code != 0 {
		t.Fatalf("token keygen: exit %d: %s", code, out)
	}
	if _, code := runTokenCLI("token", "keygen", "--out", dir); code != exitRefused {
		t.Fatalf("second keygen: got exit %d, want %d (never overwrite a key)", code, exitRefused)
	}
	out, code = runTokenCLI("token", "--key", filepath.Join(dir, "signing-key.pem"), "--issuer", "iss", "--audience", "aud",
		"--host", "h1", "--service-id", "s1", "--env", "prod", "--config-audience", "gateway", "--ttl", "10m")
	if code != 0 {
		t.Fatalf("token: exit %d: %s", code, out)
	}
	keys, err := auth.LoadKeyFile(filepath.Join(dir, "jwks.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.NewStaticKeys(keys), auth.Options{Issuer: "iss", Audience: "aud"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("minted token does not verify against the written JWKS: %v", err)
	}
	if c.Host != "h1" || c.ServiceID != "s1" || c.EnvTag != "prod" || c.ConfigAudience != "gateway" {
		t.Fatalf("got claims %+v, want h1/s1/prod gateway", c)
	}
	if ttl := time.Until(c.Expiry); ttl > 10*time.Minute || ttl < 9*time.Minute {
		t.Fatalf("token expires in %s, want about 10m", ttl)
	}
}

func TestTokenAndServeUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"token without flags", []string{"token"}},
		{"token with a bad ttl", []string{"token", "--key", "k", "--issuer", "i", "--audience", "a", "--host", "h",
			"--service-id", "s", "--env", "e", "--config-audience", "agent", "--ttl", "soon"}},
		{"keygen without --out", []string{"token", "keygen"}},
		{"serve without flags", []string{"serve"}},
		{"serve without a database", []string{"serve", "--jwks", "k", "--issuer", "i", "--audience", "a"}},
		{"serve with a cert but no key", []string{"serve", "--database", "postgres://x", "--jwks", "k", "--issuer", "i",
			"--audience", "a", "--tls-cert", "c"}},
		{"serve with a negative replica lag", []string{"serve", "--database", "postgres://x", "--jwks", "k", "--issuer", "i",
			"--audience", "a", "--max-replica-lag", "-1s"}},
		// The daemon read these as its defaults (30s, 5m, 1m, automatic).
		{"serve with a negative leeway", []string{"serve", "--database", "postgres://x", "--jwks", "k", "--issuer", "i",
			"--audience", "a", "--leeway", "-1h"}},
		{"serve with a zero leeway", []string{"serve", "--database", "postgres://x", "--jwks", "k", "--issuer", "i",
			"--audience", "a", "--leeway", "0s"}},
		{"serve with a zero JWKS refresh", []string{"serve", "--database", "postgres://x", "--jwks", "k", "--issuer", "i",
			"--audience", "a", "--jwks-refresh", "0s"}},
		{"serve with a negative TLS refresh", []string{"serve", "--database", "postgres://x", "--jwks", "k", "--issuer", "i",
			"--audience", "a", "--tls-refresh", "-1s"}},
		{"console with a negative lease horizon", []string{"console", "--database", "postgres://x", "--lease-horizon", "-1h"}},
		{"console with a zero lease horizon", []string{"console", "--database", "postgres://x", "--lease-horizon", "0s"}},
		{"serve with a negative follow interval", []string{"serve", "--database", "postgres://x", "--jwks", "k", "--issuer", "i",
			"--audience", "a", "--follow-interval", "-1s"}},
	}
	t.Setenv("CONFIGPUB_DATABASE_URL", "")
	for _, tc := range tests {
		out, code := runTokenCLI(tc.args...)
		if code != exitUsage {
			t.Errorf("%s: got exit %d, want %d: %s", tc.name, code, exitUsage, out)
		}
		if flag := tc.args[max(0, len(tc.args)-2)]; strings.Contains(" --max-replica-lag --leeway --jwks-refresh --tls-refresh --follow-interval --lease-horizon ", " "+flag+" ") && !strings.Contains(out, flag) {
			t.Errorf("%s: %q does not name %s", tc.name, out, flag)
		}
	}
}

// TestTokenRefusesWhatItCannotMint: a --ttl of 0 or less and a
// --config-audience that is not agent, gateway or knowledge are usage
// errors naming the flag, and no token is printed. Mint reads a zero TTL as
// its default, so --ttl -1h minted a token for an hour, and a token for
// audience "agnet" was minted that every Config Server refuses.
func TestTokenRefusesWhatItCannotMint(t *testing.T) {
	dir := t.TempDir()
	if out, code := runTokenCLI("token", "keygen", "--out", dir); code != exitOK {
		t.Fatalf("token keygen: exit %d: %s", code, out)
	}
	base := []string{"token", "--key", filepath.Join(dir, "signing-key.pem"), "--issuer", "iss", "--audience", "aud",
		"--host", "h", "--service-id", "s", "--env", "dev"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config-audience", "agent", "--ttl", "-1h"}, "--ttl -1h0m0s: want a positive lifetime"},
		{[]string{"--config-audience", "agent", "--ttl", "0s"}, "--ttl 0s: want a positive lifetime"},
		{[]string{"--config-audience", "agnet"}, `--config-audience "agnet": want agent, gateway or knowledge`},
	} {
		out, code := runTokenCLI(append(append([]string(nil), base...), tc.args...)...)
		if code != exitUsage || !strings.Contains(out, tc.want) || strings.Contains(out, "eyJ") {
			t.Errorf("%v: exit %d, want 2 naming %q and no token:\n%s", tc.args, code, tc.want, out)
		}
	}
}
