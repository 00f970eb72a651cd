package compiler

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/schemas"
)

// secretCase is one member of an Environment's agent settings. secret is
// the part that must never be echoed ("" for negatives).
type secretCase struct {
	name   string
	key    string
	value  any
	secret string
}

// secretCases builds the detector table. Token-shaped literals are
// assembled at run time so that this file holds no credential-shaped string.
func secretCases(t *testing.T) []secretCase {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pkcs1 := x509.MarshalPKCS1PrivateKey(rsaKey)
	pemEC := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: pkcs8}))
	pemB64 := base64.StdEncoding.EncodeToString([]byte(pemEC))
	derB64 := base64.StdEncoding.EncodeToString(pkcs8)
	derRSA := base64.RawURLEncoding.EncodeToString(pkcs1)
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	jwt := b64(`{"alg":"HS256","typ":"JWT"}`) + "." + b64(`{"sub":"svc-17","exp":1900000000}`) + ".c2lnbmF0dXJlLXZhbHVlLTQy"
	rep := strings.Repeat
	alnum := "Zx8Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk0Lz"
	ghp := "gh" + "p_" + alnum + "AbCd"
	pat := "github" + "_pat_" + "11ABCDEFG0" + rep("x1Y", 10)
	slack := "xo" + "xb-" + "1234567890-0987654321-" + alnum[:24]
	akia := "AK" + "IA" + "ZQ3W5E7R9T1Y3U5I"
	sk := "sk" + "-proj-" + alnum + "_-9"
	glpat := "gl" + "pat-" + alnum[:20]
	aiza := "AI" + "za" + "Sy" + alnum + "-_0"
	basic := base64.StdEncoding.EncodeToString([]byte("svc-user:Pw-9f8e7d"))
	hex40 := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
	b62 := "q8Wz2Lm5Xv9Rt3Ny7Kp1Hd4Gs6Jb0Fc"
	return []secretCase{
		// Credential-named members, whatever the case and separators.
		{"camelCase password", "dbPassword", "Hunter2-dbpass", "Hunter2-dbpass"},
		{"snake_case password", "db_password", "Hunter2-snake", "Hunter2-snake"},
		{"upper kebab password", "DB-PASSWORD", "Hunter2-upper", "Hunter2-upper"},
		{"X-API-Key header", "X-API-Key", "k3y-value-77", "k3y-value-77"},
		{"client-secret", "client-secret", "cl1ent-s3cret", "cl1ent-s3cret"},
		{"private_key", "private_key", "priv-k3y-body", "priv-k3y-body"},
		{"apiToken", "apiToken", "t0ken-value-9", "t0ken-value-9"},
		{"refresh_token", "refresh_token", "r3fresh-value", "r3fresh-value"},
		{"Authorization header member", "Authorization", "Token r4w-credential", "r4w-credential"},
		{"connection string", "connectionString", "Server=db;Password=Pw-c0nn", "Pw-c0nn"},
		{"passphrase", "keystorePassphrase", "kst0re-phrase", "kst0re-phrase"},
		{"empty password", "password", "", ""},
		{"numeric password", "password", 123456, "123456"},
		{"map under password", "password", map[string]any{"value": "m4p-nested-pw"}, "m4p-nested-pw"},
		// References must be exactly a reference.
		{"vault ref with appended text", "password", "vault://secret/db#pw Hunter2-tail", "Hunter2-tail"},
		{"secretRef with query", "secretRef", "vault://secret/db?token=qu3ry-tok", "qu3ry-tok"},
		{"empty vault ref", "credentialRef", "vault://", ""},
		{"vault ref traversal", "credentialRef", "vault://../../etc/sh4dow", "sh4dow"},
		{"raw DER key in signingKeyRef", "signingKeyRef", derB64, derB64[20:60]},
		{"https keyRef with userinfo", "signingKeyRef", "https://u:Pw-inf0@keys.example.com/jwks", "Pw-inf0"},
		// Credential-shaped values under neutral names.
		{"PEM EC private key", "notes", pemEC, pemEC[40:80]},
		{"PEM OpenSSH private key", "notes", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n", "b3BlbnNzaC1rZXktdjEAAAAA"},
		{"PGP private key block", "notes", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF-pgp-body\n-----END PGP PRIVATE KEY BLOCK-----", "lQOYBF-pgp-body"},
		{"PEM with odd armour", "notes", "---- begin encrypted private key ----\nMIIFHzBJBgkqh-odd\n", "MIIFHzBJBgkqh-odd"},
		{"base64-encoded PEM", "notes", pemB64, pemB64[10:50]},
		{"raw DER PKCS#8 key", "blob", derB64, derB64[20:60]},
		{"raw DER PKCS#1 key, base64url", "blob", derRSA, derRSA[30:70]},
		{"JWT", "example", jwt, jwt[10:40]},
		{"GitHub classic token", "repoAccess", ghp, ghp[4:30]},
		{"GitHub fine-grained token", "repoAccess", pat, pat[11:40]},
		{"Slack bot token", "chat", slack, slack[5:30]},
		{"AWS access key id", "awsId", akia, akia},
		{"sk- API key", "provider", sk, sk[8:30]},
		{"GitLab token", "gitlab", glpat, glpat},
		{"Google API key", "maps", aiza, aiza[4:30]},
		{"Authorization: Bearer in a value", "header", "Authorization: Bearer " + jwt, jwt[10:40]},
		{"Bearer credential", "defaultHeader", "Bearer abc123def456ghi789jk", "abc123def456ghi789jk"},
		{"Basic credential", "upstream", "Basic " + basic, basic},
		{"X-Api-Key header in a prompt", "prompt", "Call the billing API with the header X-Api-Key: 9f8e7d6c5b4a39281706f5e4d3c2b1a0.", "9f8e7d6c5b4a39281706f5e4d3c2b1a0"},
		{"api_key assignment in a note", "notes", `set api_key="live-k3yQw8Zr5Tx2Vb7Nm4Lp" before calling`, "live-k3yQw8Zr5Tx2Vb7Nm4Lp"},
		{"URL userinfo", "url", "postgres://app:Pw-us3rinfo@db.internal:5432/app", "Pw-us3rinfo"},
		{"sig query parameter", "endpoint", "https://blob.example.net/c/x?sv=2024&sig=S1gValue%2Fabc", "S1gValue"},
		{"access_token query parameter", "endpoint", "https://api.example.net/v1?access_token=acc3ss-tok", "acc3ss-tok"},
		{"password query parameter", "endpoint", "jdbc:postgresql://db/x?user=a&password=Pw-qu3ry", "Pw-qu3ry"},
		{"token as a map key", "allow", map[string]any{ghp: true}, ghp[4:30]},
		{"JWT as a map key", "sessions", map[string]any{jwt: 1}, jwt[10:40]},
		{"token in a list", "keys", []any{"fine", akia}, akia},
		{"high-entropy hex in webhookKey", "webhookKey", hex40, hex40},
		{"high-entropy base62 in hmacSignature", "hmacSignature", b62, b62},
		// Look-alikes that are not secrets.
		{"vault reference", "password", "vault://secret/dev/agent/db#password", ""},
		{"credentialRef reference", "credentialRef", "vault://secret/llm/openai#apiKey", ""},
		{"https key reference", "signingKeyRef", "https://oauth.lightapi.net/.well-known/jwks.json", ""},
		{"null password", "password", nil, ""},
		{"boolean flag named secret", "isSecret", true, ""},
		{"passwordPolicy map", "passwordPolicy", map[string]any{"minLength": 12, "requireDigits": true}, ""},
		{"token counts", "maxOutputTokens", 2048, ""},
		{"tokensPerDay", "tokensPerDay", 800000, ""},
		{"prose about Bearer", "notes", "Use Bearer authentication for upstream calls", ""},
		{"API key placeholder in a prompt", "prompt", "Send the header X-Api-Key: YOUR_API_KEY_GOES_HERE (see the runbook).", ""},
		{"API key template in a note", "notes", "api_key: ${BILLING_API_KEY}", ""},
		{"prose about passwords", "description", "Set the password field to a vault reference", ""},
		{"public certificate", "caBundle", "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n", ""},
		{"public key PEM", "verifier", "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYI\n-----END PUBLIC KEY-----\n", ""},
		{"ssh URL with user only", "repo", "ssh://git@github.com/org/policy.git", ""},
		{"URL with ordinary query", "url", "https://example.com/search?page=2&sort=asc", ""},
		{"query placeholder", "url", "https://api.example.net/v1?token=${TOKEN}", ""},
		{"jdbc URL with user only", "url", "jdbc:postgresql://postgres.dev.lightapi.net:5432/agent", ""},
		{"readable cacheKey", "cacheKey", "tenant-2024-region-eu", ""},
		{"digest in a key-like field", "contentKey", "sha256:" + rep("ab12", 16), ""},
		{"sk-learn prose", "notes", "trained with sk-learn pipelines", ""},
		{"JWT header alone", "notes", "eyJhbGciOiJIUzI1NiJ9 is a header", ""},
		{"base64 of plain text", "blob", base64.StdEncoding.EncodeToString([]byte("just a long ordinary sentence, nothing to hide here")), ""},
		{"email address", "owner", "platform-team@lightapi.net", ""},
		{"hostname with numbers", "host", "ip-10-0-12-34.eu-west-1.compute.internal", ""},
	}
}

func TestSecretDetectorTable(t *testing.T) {
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	cases := secretCases(t)
	positives := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := map[string]any{
				"apiVersion": APIVersion, "kind": KindEnvironment, "metadata": map[string]any{"name": "dev"},
				"spec": map[string]any{"settings": map[string]any{"agent": map[string]any{"c": map[string]any{c.key: c.value}}}},
			}
			b, err := json.Marshal(doc) // JSON is YAML
			if err != nil {
				t.Fatal(err)
			}
			_, err = parseSource("environments/dev.yaml", b, set, new(render.AnyBuffer))
			wantRefused := c.secret != "" || c.name == "empty password" || c.name == "empty vault ref"
			if !wantRefused {
				if err != nil {
					t.Fatalf("look-alike refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "literal secret") {
				t.Fatalf("got %v, want a literal secret refusal", err)
			}
			if c.secret != "" && strings.Contains(err.Error(), c.secret) {
				t.Errorf("error echoes the secret: %v", err)
			}
			if !strings.Contains(err.Error(), "spec.settings.agent.c") {
				t.Errorf("error %q does not name the field", err)
			}
		})
		if c.secret != "" {
			positives++
		}
	}
	if positives < 40 || len(cases)-positives < 20 {
		t.Fatalf("table has %d positives and %d look-alikes; want at least 40 and 20", positives, len(cases)-positives)
	}
}

// TestSchemaErrorsDoNotEchoValues: a value that fails a schema pattern (a
// raw DER key pasted into signingKeyRef of an artifact) is not printed.
func TestSchemaErrorsDoNotEchoValues(t *testing.T) {
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.Repeat("MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg", 2)
	err = set.Validate("source/gateway", map[string]any{
		"apiVersion": APIVersion, "kind": KindGateway, "metadata": map[string]any{"name": "g"},
		"spec": map[string]any{"issuers": []any{map[string]any{"issuer": "https://id.example", "signingKeyRef": secret}}},
	})
	if err == nil {
		t.Fatal("want a schema error")
	}
	if strings.Contains(err.Error(), secret[:24]) {
		t.Errorf("schema error echoes the value: %v", err)
	}
	if !strings.Contains(err.Error(), "does not match pattern") || !strings.Contains(err.Error(), "not shown") {
		t.Errorf("schema error %q does not say which rule failed", err)
	}
}

// TestCredentialNamedTypoIsAnUnknownField: a typo that makes a member name
// read as a credential's (maxOutputToken for maxOutputTokens) is reported
// as the unknown field it is, with its did-you-mean, not as a leaked
// token; an unknown member that does hold a secret is reported the same
// way, its value never shown; a credential-named member the schema allows
// (a free-form setting) is still a literal secret.
func TestCredentialNamedTypoIsAnUnknownField(t *testing.T) {
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	parse := func(spec string) error {
		b := []byte("apiVersion: " + APIVersion + "\nkind: Repository\nmetadata:\n  name: shop\nspec:\n" + spec)
		_, err := parseSource("configpub.yaml", b, set, new(render.AnyBuffer))
		return err
	}
	err = parse("  schemaVersion: 1\n  compatibilityGeneration: 1\n  ceilings:\n    maxOutputToken: 16384\n")
	if err == nil || !strings.Contains(err.Error(), `spec.ceilings.maxOutputToken: unknown field (did you mean "maxOutputTokens"?)`) ||
		strings.Contains(err.Error(), "literal secret") || strings.Contains(err.Error(), "16384") {
		t.Fatalf("typo of maxOutputTokens: %v; want the unknown field with its did-you-mean, no value", err)
	}
	const secret = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
	err = parse("  schemaVersion: 1\n  compatibilityGeneration: 1\n  apiToken: \"" + secret + "\"\n")
	if err == nil || !strings.Contains(err.Error(), "spec.apiToken: unknown field") || strings.Contains(err.Error(), secret[:12]) {
		t.Fatalf("unknown credential-named member: %v; want an unknown field without the value", err)
	}
}

// TestUnknownKindIsShownOnlyAsAName: the kind check runs before the secret
// scan, so an unknown kind is shown only when it reads as a kind name; a
// pasted token in kind: never reaches the error (and CI logs).
func TestUnknownKindIsShownOnlyAsAName(t *testing.T) {
	set, err := schemas.Default()
	if err != nil {
		t.Fatal(err)
	}
	parse := func(kind string) error {
		b := []byte("apiVersion: " + APIVersion + "\nkind: \"" + kind + "\"\nmetadata:\n  name: a\nspec: {}\n")
		_, err := parseSource("agents/a.yaml", b, set, new(render.AnyBuffer))
		return err
	}
	const token = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	if err := parse(token); err == nil || strings.Contains(err.Error(), token[:12]) || !strings.Contains(err.Error(), "not shown") {
		t.Fatalf("a token as kind: %v, want an unknown kind without the value", err)
	}
	if err := parse("Agnet"); err == nil || !strings.Contains(err.Error(), `unknown kind "Agnet"`) || !strings.Contains(err.Error(), "Agent") {
		t.Fatalf("a misspelt kind: %v, want it named with the kinds", err)
	}
}
