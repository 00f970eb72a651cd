package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "configpub"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// craftES256 builds a compact JWS by hand so tests can put anything in the
// header.
func craftES256(t testing.TB, key *ecdsa.PrivateKey, header, claims map[string]any) string {
	t.Helper()
	return craftES256Payload(t, key, header, mustJSON(t, claims))
}

// craftES256Payload is craftES256 with the claims as written.
func craftES256Payload(t testing.TB, key *ecdsa.PrivateKey, header map[string]any, payload []byte) string {
	t.Helper()
	input := b64(mustJSON(t, header)) + "." + b64(payload)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig)
}

func validClaims() map[string]any {
	return map[string]any{
		"iss": testIssuer, "aud": testAudience, "sub": "w1",
		"iat": testNow.Add(-time.Minute).Unix(), "nbf": testNow.Add(-time.Minute).Unix(),
		"exp":  testNow.Add(time.Hour).Unix(),
		"host": "h1.example", "sid": "svc-a", "env": "prod", "config_audience": "agent",
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func newTestVerifier(t testing.TB, keys ...Key) *Verifier {
	t.Helper()
	v, err := NewVerifier(NewStaticKeys(keys), Options{
		Issuer: testIssuer, Audience: testAudience, Now: func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func keyFor(t testing.TB, k *ecdsa.PrivateKey) Key {
	t.Helper()
	id, err := Thumbprint(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return Key{ID: id, Algorithm: ES256, Public: k.Public()}
}

func TestVerify(t *testing.T) {
	good := newKey(t)
	other := newKey(t)
	gk := keyFor(t, good)
	hdr := map[string]any{"alg": "ES256", "typ": "JWT", "kid": gk.ID}

	var jkuHits atomic.Int64
	jku := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		jkuHits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer jku.Close()

	pubDER, err := x509.MarshalPKIXPublicKey(good.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hs256 := func(secret []byte) string {
		input := b64(mustJSON(t, map[string]any{"alg": "HS256", "typ": "JWT", "kid": gk.ID})) + "." + b64(mustJSON(t, validClaims()))
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(input))
		return input + "." + b64(m.Sum(nil))
	}
	valid := craftES256(t, good, hdr, validClaims())
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + b64(mustJSON(t, with(validClaims(), "host", "h2.example"))) + "." + parts[2]
	// A payload with the host claim twice (the JSON is written by hand:
	// an encoder writes each key once).
	dupClaims := mustJSON(t, validClaims())
	duplicated := craftES256Payload(t, good, hdr, append(dupClaims[:len(dupClaims)-1], []byte(`,"host":"h2.example"}`)...))
	otherJWK := map[string]any{"kty": "EC", "crv": "P-256",
		"x": ecX(t, other), "y": ecY(t, other)}

	tests := []struct {
		name   string
		token  string
		reason string // substring of the TokenError reason; "" = valid
	}{
		{name: "valid", token: valid},
		{name: "valid without kid", token: craftES256(t, good, map[string]any{"alg": "ES256"}, validClaims())},
		{name: "missing", token: "", reason: "missing"},
		{name: "malformed", token: "not.a.jwt", reason: "malformed"},
		{name: "garbage", token: "abc", reason: "malformed"},
		{name: "expired", token: craftES256(t, good, hdr, with(validClaims(), "exp", testNow.Add(-time.Hour).Unix())), reason: "expired"},
		{name: "expired within leeway is valid", token: craftES256(t, good, hdr, with(validClaims(), "exp", testNow.Add(-10*time.Second).Unix()))},
		{name: "no exp", token: craftES256(t, good, hdr, with(validClaims(), "exp", nil)), reason: "exp missing"},
		{name: "not yet valid", token: craftES256(t, good, hdr, with(validClaims(), "nbf", testNow.Add(time.Hour).Unix())), reason: "not yet valid"},
		{name: "nbf within leeway is valid", token: craftES256(t, good, hdr, with(validClaims(), "nbf", testNow.Add(10*time.Second).Unix(), "iat", nil))},
		{name: "wrong issuer", token: craftES256(t, good, hdr, with(validClaims(), "iss", "https://evil.test")), reason: "iss"},
		{name: "wrong audience", token: craftES256(t, good, hdr, with(validClaims(), "aud", "other")), reason: "aud"},
		{name: "no audience", token: craftES256(t, good, hdr, with(validClaims(), "aud", nil)), reason: "aud"},
		{name: "alg none", token: b64(mustJSON(t, map[string]any{"alg": "none"})) + "." + b64(mustJSON(t, validClaims())) + ".", reason: "algorithm"},
		{name: "HS256 with public key PEM", token: hs256(pubPEM), reason: "algorithm"},
		{name: "HS256 with public key DER", token: hs256(pubDER), reason: "algorithm"},
		{name: "unknown kid", token: craftES256(t, other, map[string]any{"alg": "ES256", "kid": "other"}, validClaims()), reason: "unknown key id"},
		{name: "other key without kid", token: craftES256(t, other, map[string]any{"alg": "ES256"}, validClaims()), reason: "signature"},
		{name: "other key claiming our kid", token: craftES256(t, other, hdr, validClaims()), reason: "signature"},
		{name: "jku header", token: craftES256(t, other, map[string]any{"alg": "ES256", "kid": "other", "jku": jku.URL}, validClaims()), reason: "jku"},
		{name: "jku header with our kid", token: craftES256(t, good, map[string]any{"alg": "ES256", "kid": gk.ID, "jku": jku.URL}, validClaims()), reason: "jku"},
		{name: "x5u header", token: craftES256(t, good, map[string]any{"alg": "ES256", "x5u": jku.URL}, validClaims()), reason: "x5u"},
		{name: "embedded jwk", token: craftES256(t, other, map[string]any{"alg": "ES256", "jwk": otherJWK}, validClaims()), reason: "jwk"},
		{name: "tampered payload", token: tampered, reason: "signature"},
		{name: "64 KiB token", token: valid + strings.Repeat("A", 64<<10), reason: "longer than"},
		{name: "missing host", token: craftES256(t, good, hdr, with(validClaims(), "host", nil)), reason: "host missing"},
		{name: "missing sid", token: craftES256(t, good, hdr, with(validClaims(), "sid", nil)), reason: "sid missing"},
		{name: "missing env", token: craftES256(t, good, hdr, with(validClaims(), "env", nil)), reason: "env missing"},
		{name: "unknown config_audience", token: craftES256(t, good, hdr, with(validClaims(), "config_audience", "portal")), reason: "config_audience"},
		{name: "ES256 token but RS256 header", token: craftES256(t, good, map[string]any{"alg": "RS256", "kid": gk.ID}, validClaims()), reason: "signature"},
		// Signed by a trusted key, refused for what they are, not as a signature failure.
		{name: "exp a string, signed", token: craftES256(t, good, hdr, with(validClaims(), "exp", "1796515687")), reason: "signature verifies but the claims are malformed"},
		{name: "a claim given twice, signed", token: duplicated, reason: "signature verifies but a claim is given twice"},
		{name: "crit header", token: craftES256(t, good, map[string]any{"alg": "ES256", "kid": gk.ID, "crit": []string{"exp"}, "exp": 1}, validClaims()), reason: "header crit"},
	}
	v := newTestVerifier(t, gk)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(tc.token)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want a valid token", err)
				}
				if c.Host != "h1.example" || c.ServiceID != "svc-a" || c.EnvTag != "prod" || c.ConfigAudience != "agent" {
					t.Fatalf("got claims %+v, want h1.example/svc-a/prod agent", c)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("got %v, want ErrInvalidToken", err)
			}
			var te *TokenError
			if !errors.As(err, &te) || !strings.Contains(te.Reason, tc.reason) {
				t.Fatalf("got reason %q, want it to contain %q", te.Reason, tc.reason)
			}
			if tc.token != "" && strings.Contains(err.Error(), tc.token[:min(len(tc.token), 20)]) {
				t.Fatalf("error %q echoes the token", err)
			}
		})
	}
	if n := jkuHits.Load(); n != 0 {
		t.Fatalf("got %d requests to the jku/x5u URL, want 0", n)
	}
}

func TestVerifyCache(t *testing.T) {
	good := newKey(t)
	gk := keyFor(t, good)
	now := testNow
	src := &swapKeys{}
	src.set.Store(&KeySet{Keys: []Key{gk}, Generation: 1})
	v, err := NewVerifier(src, Options{Issuer: testIssuer, Audience: testAudience, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tok := craftES256(t, good, map[string]any{"alg": "ES256", "kid": gk.ID}, with(validClaims(), "exp", testNow.Add(time.Minute).Unix()))
	if _, err := v.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if got := v.cache.len(); got != 1 {
		t.Fatalf("got %d cached tokens, want 1", got)
	}
	// A cached token is still refused once expired (past the leeway).
	now = testNow.Add(2 * time.Minute)
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("expired cached token: got %v, want ErrInvalidToken", err)
	}
	// Inside the exp leeway the cache is bypassed but the token still verifies.
	now = testNow.Add(time.Minute + 5*time.Second)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("token within leeway: got %v, want valid", err)
	}
	// Rotating the key set out invalidates the cached entry.
	now = testNow
	src.set.Store(&KeySet{Keys: []Key{keyFor(t, newKey(t))}, Generation: 2})
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("after key rotation: got %v, want ErrInvalidToken", err)
	}
}

func TestTokenCacheBounded(t *testing.T) {
	c := newTokenCache(64)
	cl := &Claims{Expiry: testNow.Add(time.Hour)}
	for i := range 1000 {
		c.put(big.NewInt(int64(i)).String(), cl, 1, testNow)
	}
	if n := c.len(); n > 64 {
		t.Fatalf("got %d entries, want at most 64", n)
	}
}

type swapKeys struct{ set atomic.Pointer[KeySet] }

func (s *swapKeys) KeySet() *KeySet { return s.set.Load() }

func TestMintVerifies(t *testing.T) {
	key := newKey(t)
	tok, err := Mint(key, MintOptions{Issuer: testIssuer, Audience: testAudience, Host: "h1.example",
		ServiceID: "svc-a", EnvTag: "prod", ConfigAudience: "gateway", Now: testNow, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := newTestVerifier(t, keyFor(t, key)).Verify(tok)
	if err != nil {
		t.Fatalf("minted token: got %v, want valid", err)
	}
	if c.ConfigAudience != "gateway" || !c.Expiry.Equal(testNow.Add(time.Hour)) {
		t.Fatalf("got %+v, want gateway expiring at %v", c, testNow.Add(time.Hour))
	}
}

func TestGenerateKeyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	files, err := GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := LoadSigningKey(files.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeyFile(files.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].ID != files.KeyID || keys[0].Algorithm != ES256 {
		t.Fatalf("got keys %+v, want one ES256 key %s", keys, files.KeyID)
	}
	tok, err := Mint(signer, MintOptions{Issuer: testIssuer, Audience: testAudience, Host: "h", ServiceID: "s",
		EnvTag: "e", ConfigAudience: "agent", Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newTestVerifier(t, keys...).Verify(tok); err != nil {
		t.Fatalf("got %v, want valid", err)
	}
	if _, err := GenerateKey(dir); err == nil {
		t.Fatal("second GenerateKey: got nil, want refusal to overwrite")
	}
}

func TestParseKeys(t *testing.T) {
	ec := newKey(t)
	der, _ := x509.MarshalPKIXPublicKey(ec.Public())
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der384, _ := x509.MarshalPKIXPublicKey(p384.Public())
	ecJWK := func(extra map[string]any) map[string]any {
		return with(map[string]any{"kty": "EC", "crv": "P-256", "kid": "k1",
			"x": ecX(t, ec), "y": ecY(t, ec)}, flat(extra)...)
	}
	jwks := func(keys ...map[string]any) []byte { return mustJSON(t, map[string]any{"keys": keys}) }
	tests := []struct {
		name    string
		data    []byte
		wantN   int
		wantErr string
	}{
		{name: "pem", data: pemKey, wantN: 1},
		{name: "pem twice", data: append(append([]byte{}, pemKey...), pemKey...), wantN: 2},
		{name: "pem P-384", data: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der384}), wantErr: "P-384"},
		{name: "pem private key", data: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}), wantErr: "want PUBLIC KEY"},
		{name: "empty", data: []byte("  "), wantErr: "no usable"},
		{name: "jwks", data: jwks(ecJWK(nil)), wantN: 1},
		{name: "jwks alg ES256", data: jwks(ecJWK(map[string]any{"alg": "ES256", "use": "sig"})), wantN: 1},
		{name: "jwks alg contradicts key", data: jwks(ecJWK(map[string]any{"alg": "RS256"})), wantErr: "does not fit"},
		{name: "jwks enc key skipped", data: jwks(ecJWK(map[string]any{"use": "enc"}), ecJWK(map[string]any{"kid": "k2"})), wantN: 1},
		{name: "jwks ES384 skipped, none left", data: jwks(ecJWK(map[string]any{"alg": "ES384"})), wantErr: "no usable"},
		{name: "jwks symmetric", data: jwks(map[string]any{"kty": "oct", "k": b64([]byte("secret-secret-secret"))}), wantErr: "symmetric"},
		{name: "jwks HS256 skipped", data: jwks(map[string]any{"kty": "oct", "alg": "HS256", "k": b64([]byte("s"))}), wantErr: "no usable"},
		{name: "not json", data: []byte("{nope"), wantErr: "not a JWKS"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := ParseKeys("keys.test", tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != tc.wantN {
				t.Fatalf("got %d keys, want %d", len(keys), tc.wantN)
			}
		})
	}
}

func flat(m map[string]any) []any {
	var out []any
	for k, v := range m {
		out = append(out, k, v)
	}
	return out
}

func TestRemoteKeys(t *testing.T) {
	key := newKey(t)
	var hits atomic.Int64
	body := mustJSON(t, map[string]any{"keys": []any{map[string]any{"kty": "EC", "crv": "P-256", "kid": "r1", "alg": "ES256",
		"x": ecX(t, key), "y": ecY(t, key)}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Write(body)
	}))
	defer srv.Close()
	rk := NewRemoteKeys(srv.URL, RemoteOptions{UnknownKeyRefresh: -1})
	if n := len(rk.KeySet().Keys); n != 0 {
		t.Fatalf("before refresh: got %d keys, want 0", n)
	}
	v, err := NewVerifier(rk, Options{Issuer: testIssuer, Audience: testAudience, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	tok := craftES256(t, key, map[string]any{"alg": "ES256", "kid": "r1"}, validClaims())
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("before refresh: got %v, want ErrInvalidToken (on-demand fetches off)", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("verification fetched the JWKS %d times, want 0", n)
	}
	ctx := t.Context()
	if err := rk.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	gen := rk.KeySet().Generation
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("after refresh: got %v, want valid", err)
	}
	if err := rk.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rk.KeySet().Generation; got != gen {
		t.Fatalf("304 refresh: got generation %d, want unchanged %d", got, gen)
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("got %d JWKS fetches, want 2", n)
	}
}

// TestUnknownKeyIDFetchesTheJWKSOncePerPeriod: the issuer publishes a new
// key and signs with it at once; tokens of that key, 50 at the same time,
// verify after one fetch instead of waiting up to the refresh interval;
// 100 tokens naming made-up key ids within the period fetch nothing more,
// and one a period later fetches once.
func TestUnknownKeyIDFetchesTheJWKSOncePerPeriod(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	jwk := func(kid string, k *ecdsa.PrivateKey) any {
		return map[string]any{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "x": ecX(t, k), "y": ecY(t, k)}
	}
	var rotated atomic.Bool
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		keys := []any{jwk("r1", k1)}
		if rotated.Load() {
			keys = append(keys, jwk("r2", k2))
		}
		w.Write(mustJSON(t, map[string]any{"keys": keys}))
	}))
	defer srv.Close()
	var mu sync.Mutex
	now := testNow
	rk := NewRemoteKeys(srv.URL, RemoteOptions{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if err := rk.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(rk, Options{Issuer: testIssuer, Audience: testAudience, Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	rotated.Store(true)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := v.Verify(craftES256(t, k2, map[string]any{"alg": "ES256", "kid": "r2"}, validClaims())); err != nil {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d of 50 tokens of the newly published key refused", n)
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2 (the first refresh and one for the new key)", n)
	}
	for i := range 100 {
		if _, err := v.Verify(craftES256(t, k2, map[string]any{"alg": "ES256", "kid": fmt.Sprintf("x%d", i)}, validClaims())); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("made-up key id: %v, want refused", err)
		}
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("made-up key ids within the period: %d fetches, want still 2", n)
	}
	mu.Lock()
	now = now.Add(DefaultUnknownKeyRefresh)
	mu.Unlock()
	if _, err := v.Verify(craftES256(t, k2, map[string]any{"alg": "ES256", "kid": "x"}, validClaims())); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("made-up key id: %v, want refused", err)
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("a period later: %d fetches, want 3", n)
	}
}

// ecX and ecY return the base64url coordinates of k's public key.
func ecX(t testing.TB, k *ecdsa.PrivateKey) string { return b64(ecPoint(t, k)[1:33]) }
func ecY(t testing.TB, k *ecdsa.PrivateKey) string { return b64(ecPoint(t, k)[33:]) }

func ecPoint(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := k.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil || len(b) != 65 {
		t.Fatalf("public key bytes: %v", err)
	}
	return b
}

// TestAlgorithmsFixedPerKey: RS256 and EdDSA keys verify their own tokens;
// a token whose alg differs from the one its key is fixed to is refused even
// when the kid matches.
func TestAlgorithmsFixedPerKey(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey := newKey(t)
	keyOf := func(s crypto.Signer, alg jose.SignatureAlgorithm) Key {
		id, err := Thumbprint(s.Public())
		if err != nil {
			t.Fatal(err)
		}
		return Key{ID: id, Algorithm: alg, Public: s.Public()}
	}
	rk, ek, ck := keyOf(rsaKey, RS256), keyOf(edKey, EdDSA), keyOf(ecKey, ES256)
	v := newTestVerifier(t, rk, ek, ck)
	mint := func(s crypto.Signer) string {
		tok, err := Mint(s, MintOptions{Issuer: testIssuer, Audience: testAudience, Host: "h", ServiceID: "s",
			EnvTag: "e", ConfigAudience: "agent", Now: testNow})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for name, s := range map[string]crypto.Signer{"RS256": rsaKey, "EdDSA": edKey, "ES256": ecKey} {
		if _, err := v.Verify(mint(s)); err != nil {
			t.Errorf("%s token: got %v, want valid", name, err)
		}
	}
	// An EdDSA-signed token naming the ES256 key's kid: the key is fixed to
	// ES256, so the EdDSA signature is never checked against it.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: EdDSA, Key: jose.JSONWebKey{Key: edKey, KeyID: ck.ID}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(signer).Claims(validClaims()).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	var te *TokenError
	if _, err := v.Verify(tok); !errors.As(err, &te) || !strings.Contains(te.Reason, "signature") {
		t.Fatalf("EdDSA token under an ES256 kid: got %v, want refusal", err)
	}
	// A 1024-bit RSA key is refused as configuration.
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	der, _ := x509.MarshalPKIXPublicKey(small.Public())
	if _, err := ParseKeys("small.pem", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); err == nil ||
		!strings.Contains(err.Error(), "at least 2048") {
		t.Fatalf("1024-bit RSA key: got %v, want refusal", err)
	}
}
