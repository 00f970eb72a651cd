package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/jcs"
	canon "github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
)

// tb is the part of testing.TB the helpers use, so that Example functions
// can build a world too.
type tb interface {
	Helper()
	Fatal(args ...any)
	TempDir() string
	Cleanup(func())
}

// t0 is the fixed "now" every world starts at.
var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

type keyPair struct {
	priv    *ecdsa.PrivateKey
	trusted signing.TrustedKey
}

func newKeyPair(t tb) keyPair {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := signing.NewTrustedKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{priv: priv, trusted: tk}
}

func uuidN(n int64) string { return fmt.Sprintf("%08x-0000-8000-8000-%012x", n, n) }

func digestOf(s string) string { return jcs.BytesDigest([]byte(s)) }

// spec describes one release served to a runtime; zero fields take the
// defaults of world.spec.
type spec struct {
	release, sequence, epoch int64
	manifestEpoch            int64 // manifest revocationEpoch; 0 = epoch
	issuedAt                 time.Time
	leaseFrom, leaseTo       time.Time // delivery manifest lease
	envFrom, envTo           time.Time // envelope validity (the activation window)
	activatedAt              time.Time // manifest activatedAt; zero = none (a manifest signed before it existed)
	envHost                  string    // envelope host (and manifest host unless manifestHost)
	manifestHost             string
	schemaVersion            int
	namespace                map[string]any
	contentDigest            string // overrides the computed one
	propertySetDigest        string // overrides the computed one
	extraEnvelope            [][2]string
	extraTop                 [][2]string
	signer                   *keyPair
	keyID                    string // overrides the signer's key id
	pad                      int    // bytes of filler in the namespace
	phase                    string // manifest phase ("" current, bundle.PhaseCandidate)
}

// release is one rendered, signed snapshot with its delivery manifest.
type release struct {
	spec          spec
	Envelope      bundle.RuntimePolicy
	Values        []byte
	Manifest      bundle.DeliveryManifest
	ManifestBytes []byte
	Signature     string
	KeyID         string
}

func (r *release) ArtifactDigest() string { return jcs.BytesDigest(r.Values) }

// headers returns the contract response headers of r.
func (r *release) headers() http.Header {
	h := http.Header{}
	d := r.ArtifactDigest()
	raw, _ := hex.DecodeString(d[len("sha256:"):])
	h.Set("Content-Type", "application/yaml")
	h.Set("ETag", `"`+d+`"`)
	h.Set("Repr-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(raw)+":")
	h.Set("X-Config-Snapshot-Id", r.Manifest.SnapshotID)
	h.Set("X-Policy-Publication-Id", r.Manifest.PublicationID)
	h.Set("X-Policy-Digest", r.Manifest.PolicyDigest)
	h.Set("X-Content-Digest", r.Manifest.ContentDigest)
	h.Set("X-Artifact-Digest", d)
	h.Set("X-Config-Release-Version", strconv.FormatInt(r.Manifest.ReleaseVersion, 10))
	h.Set("X-Config-Valid-From", r.Manifest.ValidFrom)
	h.Set("X-Config-Refresh-After", r.Manifest.RefreshAfter)
	h.Set("X-Config-Expires-At", r.Manifest.ExpiresAt)
	h.Set("X-Config-Manifest", base64.RawURLEncoding.EncodeToString(r.ManifestBytes))
	h.Set("X-Manifest-Key-Id", r.KeyID)
	h.Set("X-Manifest-Signature", r.Signature)
	return h
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// world is a runtime identity, its trusted key, an injected clock and a test
// Config Server serving signed responses exactly per docs/wire-contract.md.
type world struct {
	t     tb
	id    bundle.Identity
	aud   string
	clock *simclock.Clock
	key   keyPair
	srv   *testServer
	dir   string
}

func newWorld(t tb) *world {
	t.Helper()
	w := &world{
		t:     t,
		id:    bundle.Identity{Host: "payments.example", ServiceID: "agent-42", EnvTag: "prod"},
		aud:   bundle.AudienceAgent,
		clock: simclock.New(t0),
		key:   newKeyPair(t),
		dir:   t.TempDir(),
	}
	w.srv = newTestServer(t, w.id, "test-token")
	w.srv.now = w.clock.Now // its Date header: the server's clock agrees with the runtime's
	return w
}

func (w *world) options() client.Options {
	return client.Options{
		ServerURL:    w.srv.URL,
		Identity:     w.id,
		Audience:     w.aud,
		TokenSource:  func(context.Context) (string, error) { return "test-token", nil },
		TrustedKeys:  []signing.TrustedKey{w.key.trusted},
		CacheDir:     w.dir,
		Skew:         30 * time.Second,
		Clock:        w.clock,
		HTTPClient:   w.srv.Client(),
		MaxBodyBytes: 64 << 10,
	}
}

func (w *world) client(mods ...func(*client.Options)) *client.Client {
	w.t.Helper()
	o := w.options()
	for _, m := range mods {
		m(&o)
	}
	c, err := client.New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

// spec returns release n with sequence n, epoch 3, a manifest lease of
// [now-1h, now+2h), an envelope validity of [now-24h, now+30d) and
// activatedAt now-1h.
func (w *world) spec(n int64) spec {
	now := w.clock.Now()
	return spec{
		release: n, sequence: n, epoch: 3, issuedAt: now.Add(-time.Hour + time.Duration(n)*time.Second),
		activatedAt: now.Add(-time.Hour),
		leaseFrom:   now.Add(-time.Hour), leaseTo: now.Add(2 * time.Hour),
		envFrom: now.Add(-24 * time.Hour), envTo: now.Add(30 * 24 * time.Hour),
		envHost: w.id.Host, schemaVersion: bundle.SchemaVersion,
		namespace: map[string]any{
			"agentName": "advisor",
			"release":   n,
			"model":     map[string]any{"alias": "default", "maxTokens": 4096, "temperature": "0.2"},
			"tools":     []any{"search", "calculator"},
			"memory":    map[string]any{"enabled": true, "ttlHours": 24, "store": nil},
		},
		signer: &w.key,
	}
}

// build renders and signs s.
func (w *world) build(s spec) *release {
	w.t.Helper()
	ns := s.namespace
	if s.pad > 0 {
		ns = copyMap(ns)
		filler := map[string]any{}
		for i := 0; i < s.pad/64; i++ {
			filler[fmt.Sprintf("rule%03d", i)] = fmt.Sprintf("allow tool-%03d for tenant-a within budget %06d", i, i)
		}
		ns["rules"] = filler
	}
	nsJSON, err := canon.Marshal(ns)
	if err != nil {
		w.t.Fatal(err)
	}
	cd := jcs.BytesDigest(nsJSON)
	if s.contentDigest != "" {
		cd = s.contentDigest
	}
	env := bundle.RuntimePolicy{
		PublicationID: uuidN(1000 + s.release), ReleaseVersion: s.release,
		PolicySnapshotID: uuidN(2000 + s.release), PolicyVersion: s.release,
		PolicyDigest: digestOf(fmt.Sprintf("policy-%d", s.release)), ContentDigest: cd,
		Audience: w.aud, Host: s.envHost, ServiceID: w.id.ServiceID, EnvTag: w.id.EnvTag,
		SourceEventSequence: 100 + s.release, SchemaVersion: s.schemaVersion,
		CreatedAt: rfc(s.envFrom), ValidFrom: rfc(s.envFrom),
		RefreshAfter: rfc(s.envFrom.Add(s.envTo.Sub(s.envFrom) / 2)), ExpiresAt: rfc(s.envTo),
		RevocationEpoch: s.epoch, CompatibilityGeneration: 1,
	}
	settings := map[string]any{"logging.level": "INFO", "server.httpsPort": 8443}
	values := render(w.t, env, bundle.Namespace(w.aud), ns, settings, s.extraEnvelope, s.extraTop)
	psd := propertySetDigest(w.t, settings, s.extraTop)
	if s.propertySetDigest != "" {
		psd = s.propertySetDigest
	}
	mhost := s.envHost
	if s.manifestHost != "" {
		mhost = s.manifestHost
	}
	m := bundle.DeliveryManifest{
		Type: bundle.DeliveryManifestType, Host: mhost, ServiceID: env.ServiceID, EnvTag: env.EnvTag,
		Audience: env.Audience, SnapshotID: uuidN(3000 + s.release), PublicationID: env.PublicationID,
		PolicySnapshotID: env.PolicySnapshotID, ReleaseVersion: env.ReleaseVersion,
		ArtifactDigest: jcs.BytesDigest(values), ContentDigest: env.ContentDigest, PolicyDigest: env.PolicyDigest,
		PropertySetDigest: psd, SchemaVersion: env.SchemaVersion,
		CompatibilityGeneration: env.CompatibilityGeneration, RevocationEpoch: env.RevocationEpoch,
		Sequence: s.sequence, IssuedAt: rfc(s.issuedAt), ValidFrom: rfc(s.leaseFrom),
		RefreshAfter: rfc(s.leaseFrom.Add(s.leaseTo.Sub(s.leaseFrom) / 2)), ExpiresAt: rfc(s.leaseTo),
	}
	m.Phase = s.phase
	if s.manifestEpoch != 0 {
		m.RevocationEpoch = s.manifestEpoch
	}
	if !s.activatedAt.IsZero() {
		m.ActivatedAt = rfc(s.activatedAt)
	}
	mb, err := m.Marshal()
	if err != nil {
		w.t.Fatal(err)
	}
	sig, err := signing.SignBlob(s.signer.priv, mb)
	if err != nil {
		w.t.Fatal(err)
	}
	kid := s.signer.trusted.ID
	if s.keyID != "" {
		kid = s.keyID
	}
	return &release{spec: s, Envelope: env, Values: values, Manifest: m, ManifestBytes: mb, Signature: sig, KeyID: kid}
}

// propertySetDigest is the digest of the settings properties render writes:
// settings and the extra top-level keys (their values read as YAML scalars).
func propertySetDigest(t tb, settings map[string]any, extraTop [][2]string) string {
	t.Helper()
	props := copyMap(settings)
	for _, kv := range extraTop {
		var v any
		if err := yaml.Unmarshal([]byte(kv[1]), &v); err != nil {
			t.Fatal(err)
		}
		props[kv[0]] = v
	}
	b, err := canon.Marshal(props)
	if err != nil {
		t.Fatal(err)
	}
	return jcs.BytesDigest(b)
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// render writes values.yml: the runtimePolicy envelope in bundle.RuntimePolicy
// field order, then the audience namespace, then the flat settings properties.
func render(t tb, env bundle.RuntimePolicy, ns string, nsVal, settings map[string]any, extraEnv, extraTop [][2]string) []byte {
	t.Helper()
	var envNode, nsNode, setNode yaml.Node
	if err := envNode.Encode(env); err != nil {
		t.Fatal(err)
	}
	for _, kv := range extraEnv {
		envNode.Content = append(envNode.Content, scalarNode(kv[0]), scalarNode(kv[1]))
	}
	if err := nsNode.Encode(nsVal); err != nil {
		t.Fatal(err)
	}
	if err := setNode.Encode(settings); err != nil {
		t.Fatal(err)
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		scalarNode("runtimePolicy"), &envNode, scalarNode(ns), &nsNode,
	}}
	// Settings are flat top-level properties after the namespace.
	root.Content = append(root.Content, setNode.Content...)
	for _, kv := range extraTop {
		root.Content = append(root.Content, scalarNode(kv[0]), scalarNode(kv[1]))
	}
	b, err := yaml.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func scalarNode(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

func readFile(t tb, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testServer is an in-process Config Server (GET /configs, POST
// /configs/evidence) serving the current release per docs/wire-contract.md.
type testServer struct {
	*httptest.Server
	id    bundle.Identity
	token string

	mu        sync.Mutex
	rel       *release
	hdr       http.Header                             // rel.headers(), computed once per set
	mutate    func(h http.Header, body []byte) []byte // tamper with the next responses
	raw       http.HandlerFunc                        // replaces the handler entirely
	noCond    bool                                    // ignore If-None-Match
	notModHdr func(h http.Header)                     // extra headers on a 304
	last      http.Header                             // headers of the last request
	evidence  [][]byte
	history   map[string]*release // every release set, by snapshot id (GET /configs/snapshots/{id})
	candidate *release            // served for configPhase=candidate when set
	now       func() time.Time    // the server's clock, sent as Date; nil: the wall clock
}

func newTestServer(t tb, id bundle.Identity, token string) *testServer {
	s := &testServer{id: id, token: token}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rel, hdr, mutate, raw, noCond, notModHdr := s.rel, s.hdr, s.mutate, s.raw, s.noCond, s.notModHdr
	s.last = r.Header
	s.mu.Unlock()
	if s.now != nil {
		w.Header().Set("Date", s.now().UTC().Format(http.TimeFormat))
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/configs/evidence" {
		b := make([]byte, 16<<10)
		n, _ := r.Body.Read(b)
		s.mu.Lock()
		s.evidence = append(s.evidence, b[:n])
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if raw != nil {
		raw(w, r)
		return
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/configs/snapshots/"); ok {
		s.mu.Lock()
		rel = s.history[id]
		s.mu.Unlock()
		if rel == nil {
			http.Error(w, `{"error":"forbidden"}`, http.StatusForbidden)
			return
		}
		hdr, mutate = rel.headers(), nil
	} else if q := r.URL.Query(); r.URL.Path != "/configs" || q.Get("host") != s.id.Host || q.Get("serviceId") != s.id.ServiceID || q.Get("envTag") != s.id.EnvTag {
		http.Error(w, `{"error":"forbidden"}`, http.StatusForbidden)
		return
	} else if q.Get("configPhase") == bundle.PhaseCandidate {
		s.mu.Lock()
		rel = s.candidate
		s.mu.Unlock()
		if rel != nil {
			hdr, mutate = rel.headers(), nil
		}
	}
	if rel == nil {
		http.Error(w, `{"error":"no current snapshot"}`, http.StatusNotFound)
		return
	}
	h, body := hdr, rel.Values
	if mutate != nil {
		h = hdr.Clone()
		body = mutate(h, append([]byte(nil), rel.Values...))
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	if inm := r.Header.Get("If-None-Match"); !noCond && inm != "" && inm == h.Get("ETag") {
		w.Header().Del("Content-Type")
		if notModHdr != nil {
			notModHdr(w.Header())
		}
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (s *testServer) set(rel *release, mutate func(http.Header, []byte) []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rel, s.mutate, s.raw, s.hdr = rel, mutate, nil, nil
	if rel != nil {
		s.hdr = rel.headers()
		if s.history == nil {
			s.history = map[string]*release{}
		}
		s.history[rel.Manifest.SnapshotID] = rel
	}
}

// revoke stops serving snapshot id by id, as the Config Server does once
// it is revoked.
func (s *testServer) revoke(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.history, id)
}

// setCandidate serves rel for configPhase=candidate (nil: 404).
func (s *testServer) setCandidate(rel *release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.candidate = rel
}

func (s *testServer) setRaw(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw = h
}

func (s *testServer) lastRequest() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}
