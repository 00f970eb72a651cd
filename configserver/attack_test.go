package configserver_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/auth"
)

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// craft builds a compact ES256 JWS by hand so the header can hold anything.
func craft(t testing.TB, key *ecdsa.PrivateKey, header, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	input := b64u(h) + "." + b64u(c)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64u(sig)
}

func claimsFor(id bundle.Identity, aud string, mods ...any) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": issuer, "aud": audience, "sub": id.String(), "iat": now.Unix(), "nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(), "host": id.Host, "sid": id.ServiceID, "env": id.EnvTag, "config_audience": aud,
	}
	for i := 0; i+1 < len(mods); i += 2 {
		c[mods[i].(string)] = mods[i+1]
	}
	return c
}

// TestTokenAttacks: each attack gets 401 with WWW-Authenticate: Bearer and
// the same body, which reveals nothing; no outbound request is made.
func TestTokenAttacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("attack-body-c0ffee"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	base := e.serve(t, configserver.ServerOptions{})

	var outbound atomic.Int64
	lure := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		outbound.Add(1)
	}))
	defer lure.Close()

	kid, _ := auth.Thumbprint(e.tokenKey.Public())
	hdr := map[string]any{"alg": "ES256", "typ": "JWT", "kid": kid}
	attacker, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pubDER, _ := x509.MarshalPKIXPublicKey(e.tokenKey.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hs := func(secret []byte) string {
		h, _ := json.Marshal(map[string]any{"alg": "HS256", "typ": "JWT", "kid": kid})
		c, _ := json.Marshal(claimsFor(idA, "agent"))
		input := b64u(h) + "." + b64u(c)
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(input))
		return input + "." + b64u(m.Sum(nil))
	}
	valid := craft(t, e.tokenKey, hdr, claimsFor(idA, "agent"))
	parts := strings.Split(valid, ".")
	cl, _ := json.Marshal(claimsFor(idA, "agent", "sid", "svc-other"))
	noneHdr, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT"})
	noneClaims, _ := json.Marshal(claimsFor(idA, "agent"))

	attacks := []struct {
		name   string
		header []string // raw Authorization header values; nil = none
	}{
		{name: "missing", header: nil},
		{name: "empty bearer", header: []string{"Bearer "}},
		{name: "basic scheme", header: []string{"Basic dXNlcjpwYXNz"}},
		{name: "malformed", header: []string{"Bearer not-a-jwt"}},
		{name: "two headers", header: []string{"Bearer " + valid, "Bearer " + valid}},
		{name: "expired", header: []string{"Bearer " + craft(t, e.tokenKey, hdr, claimsFor(idA, "agent", "exp", time.Now().Add(-time.Hour).Unix()))}},
		{name: "not yet valid", header: []string{"Bearer " + craft(t, e.tokenKey, hdr, claimsFor(idA, "agent", "nbf", time.Now().Add(time.Hour).Unix()))}},
		{name: "wrong issuer", header: []string{"Bearer " + craft(t, e.tokenKey, hdr, claimsFor(idA, "agent", "iss", "https://evil.test"))}},
		{name: "wrong audience", header: []string{"Bearer " + craft(t, e.tokenKey, hdr, claimsFor(idA, "agent", "aud", "someone-else"))}},
		{name: "alg none", header: []string{"Bearer " + b64u(noneHdr) + "." + b64u(noneClaims) + "."}},
		{name: "HS256 with the public key (PEM)", header: []string{"Bearer " + hs(pubPEM)}},
		{name: "HS256 with the public key (DER)", header: []string{"Bearer " + hs(pubDER)}},
		{name: "unknown kid", header: []string{"Bearer " + craft(t, attacker, map[string]any{"alg": "ES256", "kid": "attacker"}, claimsFor(idA, "agent"))}},
		{name: "jku header", header: []string{"Bearer " + craft(t, attacker, map[string]any{"alg": "ES256", "kid": "attacker", "jku": lure.URL + "/jwks.json"}, claimsFor(idA, "agent"))}},
		{name: "x5u header", header: []string{"Bearer " + craft(t, attacker, map[string]any{"alg": "ES256", "x5u": lure.URL + "/cert.pem"}, claimsFor(idA, "agent"))}},
		{name: "tampered payload", header: []string{"Bearer " + parts[0] + "." + b64u(cl) + "." + parts[2]}},
		{name: "64 KiB token", header: []string{"Bearer " + valid + strings.Repeat("A", 64<<10)}},
	}
	client := &http.Client{Timeout: 10 * time.Second}
	var firstBody []byte
	for _, tc := range attacks {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", base+configsPath(idA), nil)
			for _, v := range tc.header {
				req.Header.Add("Authorization", v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := readAll(resp)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("got status %d, want 401: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Fatalf("WWW-Authenticate %q, want Bearer", got)
			}
			if firstBody == nil {
				firstBody = body
			} else if !bytes.Equal(body, firstBody) {
				t.Fatalf("body %q differs from %q: it reveals which check failed", body, firstBody)
			}
			for _, v := range tc.header {
				for _, p := range strings.Split(strings.TrimPrefix(v, "Bearer "), ".") {
					if len(p) > 8 && bytes.Contains(body, []byte(p)) {
						t.Fatalf("body %q echoes the token", body)
					}
				}
			}
			if resp.Header.Get("X-Config-Snapshot-Id") != "" || bytes.Contains(body, []byte("attack-body")) {
				t.Fatal("401 leaks configuration")
			}
		})
	}
	if n := outbound.Load(); n != 0 {
		t.Fatalf("got %d outbound requests caused by token headers, want 0", n)
	}
	// The valid token itself is accepted (the table is not vacuous).
	if resp, _ := doURL(t, client, "GET", base+configsPath(idA), valid); resp.StatusCode != 200 {
		t.Fatalf("valid token: got %d, want 200", resp.StatusCode)
	}
}

// TestIdentityBoundary: a token for A gets the same 403 for B whether B
// exists or not; omitted identity fields come from the claims; legacy
// selectors are ignored.
func TestIdentityBoundary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	snA := e.seed.publish(t, idA, "agent", 1, yamlBody("boundary-a"))
	e.seed.move(t, snA)
	idB := bundle.Identity{Host: "h2.example", ServiceID: "svc-b", EnvTag: "prod"}
	snB := e.seed.publish(t, idB, "agent", 1, yamlBody("boundary-b"))
	e.seed.move(t, snB)
	oldA := e.seed.publish(t, idA, "agent", 0+2, yamlBody("boundary-a-old"))
	waitServed(t, e, idA, "agent", snA.ID)
	waitServed(t, e, idB, "agent", snB.ID)
	tokA := e.token(t, idA, "agent")

	forbidden := []struct{ name, path string }{
		{"existing other host", configsPath(idB)},
		{"missing other host", configsPath(bundle.Identity{Host: "h9.example", ServiceID: "svc-b", EnvTag: "prod"})},
		{"other serviceId (exists for B)", "/configs?host=h1.example&serviceId=svc-b&envTag=prod"},
		{"other serviceId (missing)", "/configs?host=h1.example&serviceId=svc-zz&envTag=prod"},
		{"other envTag", "/configs?host=h1.example&serviceId=svc-a&envTag=staging"},
		{"other host, omitted rest", "/configs?host=h2.example"},
		{"empty serviceId", "/configs?host=h1.example&serviceId=&envTag=prod"},
		{"historical snapshot of B", "/configs/snapshots/" + snB.ID},
		{"unknown snapshot", "/configs/snapshots/" + uuid.NewString()},
	}
	var first []byte
	for _, tc := range forbidden {
		resp, body := e.do(t, "GET", tc.path, tokA)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: got %d, want 403: %s", tc.name, resp.StatusCode, body)
		}
		if first == nil {
			first = body
		} else if !bytes.Equal(first, body) {
			t.Fatalf("%s: body %q differs from %q", tc.name, body, first)
		}
		if bytes.Contains(body, []byte("boundary")) || resp.Header.Get("X-Config-Snapshot-Id") != "" {
			t.Fatalf("%s: 403 leaks configuration", tc.name)
		}
	}
	allowed := []struct{ name, path, wantSnapshot string }{
		{"full query", configsPath(idA), snA.ID},
		{"serviceId and envTag from claims", "/configs?host=h1.example", snA.ID},
		{"envTag from claims", "/configs?host=h1.example&serviceId=svc-a", snA.ID},
		{"legacy selectors ignored", configsPath(idA) + "&productId=p&productVersion=9&apiId=h2.example&apiVersion=2&configPhase=runtime", snA.ID},
		{"own historical snapshot", "/configs/snapshots/" + snA.ID, snA.ID},
	}
	for _, tc := range allowed {
		resp, _ := e.do(t, "GET", tc.path, tokA)
		if resp.StatusCode != 200 || resp.Header.Get("X-Config-Snapshot-Id") != tc.wantSnapshot {
			t.Fatalf("%s: got %d snapshot %q, want 200 %s", tc.name, resp.StatusCode, resp.Header.Get("X-Config-Snapshot-Id"), tc.wantSnapshot)
		}
	}
	// A never-delivered snapshot of A is served without manifest headers.
	resp, body := e.do(t, "GET", "/configs/snapshots/"+oldA.ID, tokA)
	if resp.StatusCode != 200 || !bytes.Equal(body, oldA.Body) || resp.Header.Get("X-Config-Manifest") != "" {
		t.Fatalf("undelivered own snapshot: got %d manifest %q, want 200 without manifest", resp.StatusCode, resp.Header.Get("X-Config-Manifest"))
	}
	bad := []struct{ name, path string }{
		{"no host", "/configs?serviceId=svc-a"},
		{"host twice", "/configs?host=h1.example&host=h2.example"},
		{"bad escape", "/configs?host=%zz"},
		{"snapshot id not a uuid", "/configs/snapshots/not-a-uuid"},
	}
	for _, tc := range bad {
		if resp, body := e.do(t, "GET", tc.path, tokA); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: got %d, want 400: %s", tc.name, resp.StatusCode, body)
		}
	}
	// The token's config_audience must match the snapshot's audience.
	if resp, _ := e.do(t, "GET", configsPath(idA), e.token(t, idA, "gateway")); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("audience mismatch: got %d, want 403", resp.StatusCode)
	}
	// No current pointer for a valid identity: 404.
	idC := bundle.Identity{Host: "h3.example", ServiceID: "svc-c", EnvTag: "prod"}
	if resp, _ := e.do(t, "GET", configsPath(idC), e.token(t, idC, "agent")); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("no pointer: got %d, want 404", resp.StatusCode)
	}
	// Request bodies are refused on reads.
	req, _ := http.NewRequest("GET", e.srv.URL+configsPath(idA), strings.NewReader("x"))
	req.Header.Set("Authorization", "Bearer "+tokA)
	r2, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusBadRequest {
		t.Fatalf("GET with body: got %d, want 400", r2.StatusCode)
	}
}
