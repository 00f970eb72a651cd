package daemon_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/syncbuf"

	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/daemon"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/testpki"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	issuer   = "https://issuer.daemon.test"
	audience = "configpub"
)

// start runs daemon.Run until the test ends and returns the bound address.
func start(t *testing.T, cfg daemon.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run after cancel: got %v, want nil", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return ln.Addr().String()
}

func mint(t *testing.T, keyPath, thumb string) string {
	t.Helper()
	k, err := auth.LoadSigningKey(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.Mint(k, auth.MintOptions{Issuer: issuer, Audience: audience, Host: "h1", ServiceID: "s1",
		EnvTag: "dev", ConfigAudience: "agent", CertThumbprint: thumb})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func get(t *testing.T, c *http.Client, url, tok string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitStatus(t *testing.T, c *http.Client, url string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if get(t, c, url, "") == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d within 10s", url, want)
}

func TestRunWithKeyFileAndURL(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dir := t.TempDir()
	files, err := auth.GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := os.ReadFile(files.JWKS)
	if err != nil {
		t.Fatal(err)
	}
	jwksSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(jwks) }))
	defer jwksSrv.Close()
	tok := mint(t, files.PrivateKey, "")
	for _, src := range []string{files.JWKS, jwksSrv.URL} {
		addr := start(t, daemon.Config{DatabaseURL: db.URLFor(t, "configpub_server"), JWKS: src, Issuer: issuer, Audience: audience})
		base := "http://" + addr
		waitStatus(t, http.DefaultClient, base+"/readyz", 200)
		// Authenticated, store reachable, no pointer for this identity: 404.
		if got := get(t, http.DefaultClient, base+"/configs?host=h1", tok); got != http.StatusNotFound {
			t.Fatalf("jwks %s: got %d, want 404", src, got)
		}
		if got := get(t, http.DefaultClient, base+"/configs?host=h1", tok+"x"); got != http.StatusUnauthorized {
			t.Fatalf("jwks %s, bad token: got %d, want 401", src, got)
		}
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  daemon.Config
	}{
		{"nothing", daemon.Config{}},
		{"tls cert without key", daemon.Config{DatabaseURL: "postgres://x", JWKS: "k", Issuer: "i", Audience: "a", TLSCert: "c"}},
		{"client ca without tls", daemon.Config{DatabaseURL: "postgres://x", JWKS: "k", Issuer: "i", Audience: "a", ClientCA: "ca"}},
		{"binding without client ca", daemon.Config{DatabaseURL: "postgres://x", JWKS: "k", Issuer: "i", Audience: "a", RequireCertBinding: true}},
	}
	for _, tc := range tests {
		if err := daemon.Run(context.Background(), tc.cfg); !errors.Is(err, daemon.ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", tc.name, err)
		}
	}
}

func TestMutualTLSCertificateBinding(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dir := t.TempDir()
	files, err := auth.GenerateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := testpki.NewCA(t, "test ca", now.Add(-time.Hour), now.Add(time.Hour))
	clientCert := func() (tls.Certificate, string) {
		l := ca.Client(t, now.Add(-time.Hour), now.Add(time.Hour))
		sum := sha256.Sum256(l.Cert.Raw)
		return l.TLS(t), base64.RawURLEncoding.EncodeToString(sum[:])
	}
	cert1, thumb1 := clientCert()
	cert2, _ := clientCert()
	caPath, crt, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	testpki.WriteFile(t, caPath, ca.PEM)
	ca.Server(t, now.Add(-time.Hour), now.Add(time.Hour)).Write(t, crt, key)

	addr := start(t, daemon.Config{DatabaseURL: db.URLFor(t, "configpub_server"), JWKS: files.JWKS, Issuer: issuer,
		Audience: audience, TLSCert: crt, TLSKey: key, ClientCA: caPath, RequireCertBinding: true})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	}
	base := "https://" + addr
	waitStatus(t, client(cert1), base+"/readyz", 200)
	url := base + "/configs?host=h1"
	tests := []struct {
		name   string
		client *http.Client
		token  string
		want   int
	}{
		{"bound token, its certificate", client(cert1), mint(t, files.PrivateKey, thumb1), http.StatusNotFound},
		{"bound token, another certificate", client(cert2), mint(t, files.PrivateKey, thumb1), http.StatusUnauthorized},
		{"unbound token", client(cert1), mint(t, files.PrivateKey, ""), http.StatusUnauthorized},
	}
	for _, tc := range tests {
		if got := get(t, tc.client, url, tc.token); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
	req, _ := http.NewRequest("GET", url, nil)
	if resp, err := client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("no client certificate: got status %d, want a TLS handshake failure", resp.StatusCode)
	}
}

// A Config Server pointed at a hot standby (a streaming replica) becomes
// ready and answers from it, following by polling since the standby
// refuses LISTEN.
func TestRunOnAHotStandby(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	files, err := auth.GenerateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	addr := start(t, daemon.Config{DatabaseURL: db.ReplicaURLFor(t, "configpub_server"), JWKS: files.JWKS,
		Issuer: issuer, Audience: audience, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	base := "http://" + addr
	waitStatus(t, http.DefaultClient, base+"/readyz", 200)
	// Authenticated, standby reachable, no pointer for this identity: 404.
	tok := mint(t, files.PrivateKey, "")
	if got := get(t, http.DefaultClient, base+"/configs?host=h1&serviceId=s1&envTag=dev", tok); got != 404 {
		t.Fatalf("GET /configs on the standby: %d, want 404", got)
	}

	// A standby takes no writes: runtime evidence is refused with a 503
	// (the server's log says why), unless the server has a pool on the
	// primary for it.
	evidence := func(base string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/configs/evidence", strings.NewReader(
			`{"host":"h1","serviceId":"s1","envTag":"dev","outcome":"REJECTED","reason":"DIGEST_MISMATCH"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := evidence(base); code != http.StatusServiceUnavailable {
		t.Errorf("evidence on the standby alone: %d %s, want 503", code, body)
	}
	if !strings.Contains(logs.String(), "hot standby, which takes no writes") {
		t.Errorf("the refused evidence's log line does not name the hot standby:\n%s", logs.String())
	}
	withPrimary := "http://" + start(t, daemon.Config{DatabaseURL: db.ReplicaURLFor(t, "configpub_server"),
		EvidenceDatabaseURL: db.URLFor(t, "configpub_server"), JWKS: files.JWKS, Issuer: issuer, Audience: audience})
	waitStatus(t, http.DefaultClient, withPrimary+"/readyz", 200)
	if code, body := evidence(withPrimary); code != http.StatusNoContent {
		t.Fatalf("evidence with --evidence-database: %d %s, want 204", code, body)
	}
	var n int
	if err := db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM configpub.runtime_evidence
		WHERE host = 'h1' AND outcome = 'REJECTED'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("evidence rows on the primary: %d, %v; want 1", n, err)
	}
}

// TestRunFollowsRotatedFiles rotates, under a running server, the
// workload-token key in its --jwks file and its TLS certificate: each is in
// use within a reload interval, with no restart, and a half-written key
// file changes nothing; /metrics follows the certificate's expiry, the
// keys in use and the failed reads.
func TestRunFollowsRotatedFiles(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dir := t.TempDir()
	k1, err := auth.GenerateKey(filepath.Join(dir, "k1"))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := auth.GenerateKey(filepath.Join(dir, "k2"))
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	writeJWKS := func(from ...*auth.KeyFiles) {
		t.Helper()
		var all []json.RawMessage
		for _, kf := range from {
			var doc struct{ Keys []json.RawMessage }
			data, err := os.ReadFile(kf.JWKS)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			all = append(all, doc.Keys...)
		}
		data, _ := json.Marshal(map[string]any{"keys": all})
		if err := os.WriteFile(jwks+".tmp", data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(jwks+".tmp", jwks); err != nil {
			t.Fatal(err)
		}
	}
	writeJWKS(k1)

	now := time.Now()
	ca := testpki.NewCA(t, "test ca", now.Add(-time.Hour), now.Add(365*24*time.Hour))
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	issue := func(lifetime time.Duration) *x509.Certificate {
		t.Helper()
		l := ca.Server(t, now.Add(-time.Hour), now.Add(lifetime))
		l.Write(t, crt, key)
		return l.Cert
	}
	first := issue(24 * time.Hour)

	addr := start(t, daemon.Config{DatabaseURL: db.URLFor(t, "configpub_server"), JWKS: jwks, JWKSRefresh: 10 * time.Millisecond,
		Issuer: issuer, Audience: audience, TLSCert: crt, TLSKey: key, TLSRefresh: 10 * time.Millisecond})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	// A new connection for every request, to see the certificate served now.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: roots}}}
	base := "https://" + addr
	waitStatus(t, client, base+"/readyz", 200)
	url := base + "/configs?host=h1"
	tok1, tok2 := mint(t, k1.PrivateKey, ""), mint(t, k2.PrivateKey, "")
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	status := func(tok string, want int) func() bool {
		return func() bool { return get(t, client, url, tok) == want }
	}
	served := func() *x509.Certificate {
		resp, err := client.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.TLS.PeerCertificates[0]
	}
	metric := func(name string) float64 {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					t.Fatalf("%s %q: %v", name, v, err)
				}
				return f
			}
		}
		t.Fatalf("/metrics has no %s", name)
		return 0
	}
	expiryMetric := func() int64 { return int64(metric("configpub_server_tls_certificate_expiry_timestamp_seconds")) }
	keysInUse := func(n float64) func() bool {
		return func() bool { return metric("configpub_server_token_keys") == n }
	}

	if got := get(t, client, url, tok1); got != http.StatusNotFound {
		t.Fatalf("token of the key in --jwks: got %d, want 404", got)
	}
	if got := get(t, client, url, tok2); got != http.StatusUnauthorized {
		t.Fatalf("token of a key not in --jwks: got %d, want 401", got)
	}
	if c, exp := served(), expiryMetric(); c.SerialNumber.Cmp(first.SerialNumber) != 0 || exp != first.NotAfter.Unix() {
		t.Fatalf("serving serial %v, expiry metric %d; want serial %v expiring %d", c.SerialNumber, exp, first.SerialNumber, first.NotAfter.Unix())
	}

	if !keysInUse(1)() || metric("configpub_server_token_keys_refresh_timestamp_seconds") <= 0 {
		t.Fatal("/metrics: want 1 token key in use and a refresh time")
	}

	writeJWKS(k1, k2) // the new key published next to the old one
	eventually("the new key accepted", status(tok2, http.StatusNotFound))
	eventually("2 token keys on /metrics", keysInUse(2))
	if got := get(t, client, url, tok1); got != http.StatusNotFound {
		t.Fatalf("during the rotation, token of the old key: got %d, want 404", got)
	}
	renewed := issue(90 * 24 * time.Hour)
	eventually("the renewed certificate served", func() bool { return served().SerialNumber.Cmp(renewed.SerialNumber) == 0 })
	if exp := expiryMetric(); exp != renewed.NotAfter.Unix() {
		t.Fatalf("expiry metric %d, want %d", exp, renewed.NotAfter.Unix())
	}
	if err := os.WriteFile(jwks, []byte(`{"keys":`), 0o644); err != nil { // half-written
		t.Fatal(err)
	}
	eventually("a failed refresh counted", func() bool { return metric("configpub_server_token_keys_refresh_failures_total") > 0 })
	if !keysInUse(2)() || get(t, client, url, tok2) != http.StatusNotFound {
		t.Fatal("a half-written --jwks file changed the keys in use")
	}
	writeJWKS(k2) // the old key removed
	eventually("the old key refused", status(tok1, http.StatusUnauthorized))
	eventually("1 token key on /metrics", keysInUse(1))
	if got := get(t, client, url, tok2); got != http.StatusNotFound {
		t.Fatalf("after the rotation, token of the new key: got %d, want 404", got)
	}
}
