package daemon_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/daemon"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/syncbuf"
	"github.com/configpub/configpub/internal/testpki"
	"github.com/configpub/configpub/promoter"
)

// TestServerMetricsAreDocumentedAndFollowConventions runs a Config Server
// with TLS and a key file, answers a good token, a forged one and a token
// that is not a JWT, and scrapes /metrics: every configpub_server_* family
// passes promlint (HELP, _total on counters, base units), carries no
// per-target label (an environment label is no target's), and is documented in docs/operations.md's metrics
// table, which names no configpub_server_* metric the server does not
// expose. The log of it all holds neither a token, nor the database
// password.
func TestServerMetricsAreDocumentedAndFollowConventions(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dir := t.TempDir()
	keys, err := auth.GenerateKey(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := testpki.NewCA(t, "test ca", now.Add(-time.Hour), now.Add(24*time.Hour))
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Server(t, now.Add(-time.Hour), now.Add(24*time.Hour)).Write(t, crt, key)
	activateOne(t, db) // a current pointer: configpub_server_lease_expiry_timestamp_seconds has a series
	var logs syncbuf.Buffer
	dsn := db.URLFor(t, "configpub_server")
	addr := start(t, daemon.Config{DatabaseURL: dsn, JWKS: keys.JWKS, Issuer: issuer, Audience: audience,
		TLSCert: crt, TLSKey: key, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	base := "https://" + addr
	waitStatus(t, client, base+"/readyz", 200)
	tok := mint(t, keys.PrivateKey, "")
	forged := tok[:strings.LastIndexByte(tok, '.')+1] + strings.Repeat("A", 86)
	for _, c := range []struct {
		tok  string
		want int
	}{{tok, http.StatusNotFound}, {forged, http.StatusUnauthorized}, {"not-a-jwt-but-a-secret-looking-string", http.StatusUnauthorized}} {
		if got := get(t, client, base+"/configs?host=h1", c.tok); got != c.want {
			t.Fatalf("GET /configs: got %d, want %d", got, c.want)
		}
	}
	get(t, client, base+"/metrics", "") // so that the next scrape has seen one

	resp, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	var ours []*dto.MetricFamily
	served := map[string]bool{}
	for name, mf := range families {
		if !strings.HasPrefix(name, "configpub_") {
			continue
		}
		ours = append(ours, mf)
		served[name] = true
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				// env is no target's: a server serves a handful.
				switch l.GetName() {
				case "host", "service_id", "serviceId", "identity", "snapshot", "path", "url":
					t.Errorf("%s carries label %q: one series per target or request", name, l.GetName())
				}
			}
		}
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}

	documented := documentedMetrics(t, "configpub_server_")
	for name := range served {
		if !documented[name] {
			t.Errorf("/metrics serves %s, which docs/operations.md's metrics table does not document", name)
		}
	}
	for name := range documented {
		if !served[name] {
			t.Errorf("docs/operations.md documents %s, which /metrics does not serve", name)
		}
	}

	out := logs.String()
	secrets := map[string]string{"token": tok, "forged signature": forged[len(forged)-20:],
		"non-JWT token": "secret-looking-string"}
	if i := strings.Index(dsn, "@"); i > 0 {
		secrets["database password"] = dsn[strings.LastIndexByte(dsn[:i], ':')+1 : i]
	}
	for what, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the log holds the %s", what)
		}
	}
}

// activateOne records and activates, through the promoter, release 1 of
// environment prod with one gateway target, so that the server holds a
// current pointer and its lease.
func activateOne(t *testing.T, db *pgtest.DB) {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := promoter.Open(ctx, db.PoolURL(t, db.URLFor(t, "configpub_promoter")), promoter.Options{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("runtimePolicy:\n  host: host-0\n  releaseVersion: 1\ngatewayPolicy: {}\n")
	sum := func(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := ps.RecordAndActivate(ctx, promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod",
		ReleaseVersion: 1, ManifestBytes: []byte("release 1\n"), Actor: "ci", Reason: "release 1",
		Targets: []promoter.Target{{Host: "host-0", ServiceID: "gw", EnvTag: "prod", Audience: "gateway",
			SnapshotID: uuid.NewString(), PublicationID: uuid.NewString(), PolicySnapshotID: uuid.NewString(),
			ReleaseVersion: 1, PolicyVersion: 1, PolicyDigest: sum([]byte("policy")), ContentDigest: sum([]byte("content")),
			PropertySetDigest: sum([]byte("properties")), ArtifactDigest: sum(body), Values: body,
			CreatedAt: now.Add(-time.Hour), ValidFrom: now.Add(-time.Hour), ExpiresAt: now.Add(21 * 24 * time.Hour),
			Changed: true, LeaseProfile: "production",
			Lease: promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute}}}}); err != nil {
		t.Fatal(err)
	}
}

// documentedMetrics returns the metric names with prefix that
// docs/operations.md's metrics tables name in their first column, and every
// other metric name with prefix the guide mentions (an alert expression).
func documentedMetrics(t *testing.T, prefix string) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(regexp.QuoteMeta(prefix)+`[a-z_]*[a-z]`).FindAllString(string(doc), -1) {
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			m = strings.TrimSuffix(m, suffix)
		}
		names[m] = true
	}
	if len(names) == 0 {
		t.Fatalf("docs/operations.md names no %s metric", prefix)
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	t.Logf("documented: %s", strings.Join(list, ", "))
	return names
}
