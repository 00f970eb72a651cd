package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/registry"
)

// fetchServer serves the compiler's golden dev advisor values.yml with a
// delivery manifest signed in the test, per docs/wire-contract.md.
type fetchServer struct {
	*httptest.Server
	id      bundle.Identity
	values  []byte
	headers http.Header
	refresh time.Time // the signed lease's refreshAfter
	expires time.Time // and expiresAt

	priv     *ecdsa.PrivateKey
	manifest bundle.DeliveryManifest // what headers serve

	mu      sync.Mutex
	flip    bool                    // serve one body byte flipped
	hold    bool                    // hold a wait= request naming the current ETag until its client goes (a Config Server's watch)
	reports []bundle.EvidenceReport // what POST /configs/evidence received
}

func newFetchServer(t *testing.T, lease time.Duration) (*fetchServer, string) {
	t.Helper()
	dir := "../../fixtures/golden/dev/dev.lightapi.net/com.networknt.agent-advisor-1.0.0"
	values, err := os.ReadFile(filepath.Join(dir, "values.yml"))
	if err != nil {
		t.Fatalf("golden fixture missing: %v", err)
	}
	var tg struct {
		SnapshotID        string `json:"snapshotId"`
		PropertySetDigest string `json:"propertySetDigest"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "target.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &tg); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		RuntimePolicy bundle.RuntimePolicy `yaml:"runtimePolicy"`
	}
	if err := yaml.Unmarshal(values, &doc); err != nil {
		t.Fatal(err)
	}
	env := doc.RuntimePolicy
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	ad := jcs.BytesDigest(values)
	m := bundle.DeliveryManifest{
		Type: bundle.DeliveryManifestType, Host: env.Host, ServiceID: env.ServiceID, EnvTag: env.EnvTag,
		Audience: env.Audience, SnapshotID: tg.SnapshotID, PublicationID: env.PublicationID,
		PolicySnapshotID: env.PolicySnapshotID, ReleaseVersion: env.ReleaseVersion, ArtifactDigest: ad,
		ContentDigest: env.ContentDigest, PolicyDigest: env.PolicyDigest, PropertySetDigest: tg.PropertySetDigest,
		SchemaVersion: env.SchemaVersion, CompatibilityGeneration: env.CompatibilityGeneration,
		RevocationEpoch: env.RevocationEpoch, Sequence: 1, ActivatedAt: env.ValidFrom, IssuedAt: now.Add(-time.Minute).Format(time.RFC3339),
		ValidFrom: now.Add(-time.Minute).Format(time.RFC3339), RefreshAfter: now.Add(lease / 2).Format(time.RFC3339Nano),
		ExpiresAt: now.Add(lease).Format(time.RFC3339),
	}
	s := &fetchServer{id: bundle.Identity{Host: env.Host, ServiceID: env.ServiceID, EnvTag: env.EnvTag}, values: values,
		refresh: now.Add(lease / 2), expires: now.Add(lease), priv: priv, manifest: m}
	s.headers = s.sign(t, m)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)

	pub, err := signing.MarshalPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(keyFile, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return s, keyFile
}

// sign returns the headers that serve m, signed with the server's key, with
// the values it serves.
func (s *fetchServer) sign(t *testing.T, m bundle.DeliveryManifest) http.Header {
	t.Helper()
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signing.SignBlob(s.priv, mb)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := signing.KeyID(&s.priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	ad := m.ArtifactDigest
	sum, _ := hex.DecodeString(strings.TrimPrefix(ad, "sha256:"))
	h := http.Header{}
	for k, v := range map[string]string{
		"ETag": `"` + ad + `"`, "Repr-Digest": "sha-256=:" + base64.StdEncoding.EncodeToString(sum) + ":",
		"X-Config-Snapshot-Id": m.SnapshotID, "X-Policy-Publication-Id": m.PublicationID,
		"X-Policy-Digest": m.PolicyDigest, "X-Content-Digest": m.ContentDigest, "X-Artifact-Digest": ad,
		"X-Config-Release-Version": strconv.FormatInt(m.ReleaseVersion, 10), "X-Config-Valid-From": m.ValidFrom,
		"X-Config-Refresh-After": m.RefreshAfter, "X-Config-Expires-At": m.ExpiresAt,
		"X-Config-Manifest": base64.RawURLEncoding.EncodeToString(mb), "X-Manifest-Key-Id": kid, "X-Manifest-Signature": sig,
	} {
		h.Set(k, v)
	}
	return h
}

// resign serves the manifest as change leaves it, signed again (a lease
// renewal keeps the sequence; a move or an epoch raise changes them).
func (s *fetchServer) resign(t *testing.T, change func(m *bundle.DeliveryManifest)) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	change(&s.manifest)
	s.headers = s.sign(t, s.manifest)
}

func (s *fetchServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer tok-123" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/configs/evidence" {
		var rep bundle.EvidenceReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.reports = append(s.reports, rep)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.mu.Lock()
	hdr := s.headers
	s.mu.Unlock()
	for k, v := range hdr {
		w.Header()[k] = v
	}
	if r.Header.Get("If-None-Match") == hdr.Get("ETag") {
		s.mu.Lock()
		hold := s.hold
		s.mu.Unlock()
		if hold && r.URL.Query().Get("wait") != "" {
			<-r.Context().Done() // the pointer never moves
			return
		}
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := append([]byte(nil), s.values...)
	s.mu.Lock()
	if s.flip {
		body[len(body)/2] ^= 1
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(body)
}

func (s *fetchServer) args(t *testing.T, keyFile, cacheDir, out string) []string {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"fetch", "--server", s.URL, "--token-file", tok, "--host", s.id.Host, "--service-id", s.id.ServiceID,
		"--env", s.id.EnvTag, "--config-audience", "agent", "--trust-key", keyFile, "--cache-dir", cacheDir, "--out", out, "--skew", "0s"}
}

func evidenceOf(t *testing.T, out string) client.Evidence {
	t.Helper()
	var ev client.Evidence
	line, _, _ := strings.Cut(out, "\n")
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("stdout is not evidence JSON: %v (%q)", err, out)
	}
	return ev
}

func TestFetchAppliesRejectsAndFailsClosed(t *testing.T) {
	s, key := newFetchServer(t, 6*time.Second)
	cache, outFile := t.TempDir(), filepath.Join(t.TempDir(), "values.yml")
	args := s.args(t, key, cache, outFile)

	steps := []struct {
		name    string
		setup   func()
		exit    int
		outcome client.Outcome
		reason  client.Reason
		outFile bool
	}{
		{"applied", func() {}, exitOK, client.OutcomeApplied, client.ReasonNewSnapshot, true},
		{"unchanged after a restart", func() {}, exitOK, client.OutcomeUnchanged, client.ReasonNotModified, true},
		{"rejected keeps the last-known-good", func() {
			s.mu.Lock()
			s.flip = true
			s.mu.Unlock()
			// Past refreshAfter the client asks unconditionally and gets the flipped body.
			time.Sleep(time.Until(s.refresh.Add(100 * time.Millisecond)))
		}, exitRefused, client.OutcomeRejected, client.ReasonDigestMismatch, true},
		{"lease over and server down: failed closed", func() {
			s.Close()
			time.Sleep(time.Until(s.expires.Add(100 * time.Millisecond)))
		}, exitFailClosed, client.OutcomeUnavailable, client.ReasonUnreachable, false},
	}
	for _, st := range steps {
		st.setup()
		out, err := runCLI(args...)
		if code := exitCode(err); code != st.exit {
			t.Fatalf("%s: exit %d (%v), want %d\n%s", st.name, code, err, st.exit, out)
		}
		ev := evidenceOf(t, out)
		if ev.Outcome != st.outcome || ev.Reason != st.reason {
			t.Fatalf("%s: got %s %s, want %s %s", st.name, ev.Outcome, ev.Reason, st.outcome, st.reason)
		}
		b, rerr := os.ReadFile(outFile)
		switch {
		case st.outFile && (rerr != nil || string(b) != string(s.values)):
			t.Fatalf("%s: --out does not hold the verified values.yml (%v)", st.name, rerr)
		case !st.outFile && rerr == nil:
			t.Fatalf("%s: --out still exists after failing closed", st.name)
		}
	}
}

// TestFetchUnwritableCacheExitsNonZero: when the seen-state cannot be
// persisted nothing is applied, --out is not written and fetch exits 1.
func TestFetchUnwritableCacheExitsNonZero(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	blocker := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(blocker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(t.TempDir(), "values.yml")
	out, err := runCLI(s.args(t, key, filepath.Join(blocker, "cache"), outFile)...)
	if code := exitCode(err); code == exitOK {
		t.Fatalf("exit 0 with an unwritable cache directory\n%s", out)
	}
	if ev := evidenceOf(t, out); ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonSeenStateUnwritable {
		t.Fatalf("got %s %s, want REJECTED SEEN_STATE_UNWRITABLE", ev.Outcome, ev.Reason)
	}
	if _, err := os.Stat(outFile); err == nil {
		t.Fatal("--out written although nothing was applied")
	}
}

func TestFetchUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"neither --server nor --oci", []string{"fetch", "--host", "h", "--service-id", "s", "--env", "e", "--config-audience", "agent", "--trust-key", "k", "--out", "o"}},
		{"--watch with --oci", []string{"fetch", "--oci", "localhost:5000/a/b@sha256:" + strings.Repeat("0", 64), "--watch", "--host", "h", "--service-id", "s", "--env", "e", "--config-audience", "agent", "--trust-key", "k", "--out", "o"}},
		{"missing --out", []string{"fetch", "--server", "http://x", "--host", "h", "--service-id", "s", "--env", "e", "--config-audience", "agent", "--trust-key", "k"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := runCLI(tc.args...); exitCode(err) != exitUsage {
				t.Fatalf("got %v (exit %d), want exit 2", err, exitCode(err))
			}
		})
	}
}

// TestFetchOCI pulls the golden advisor artifact from an in-process
// Distribution registry by digest, checks its cosign signature through the
// registry package and applies it with the client's checks.
func TestFetchOCI(t *testing.T) {
	dir := "../../fixtures/golden/dev/dev.lightapi.net/com.networknt.agent-advisor-1.0.0"
	values, err := os.ReadFile(filepath.Join(dir, "values.yml"))
	if err != nil {
		t.Fatalf("golden fixture missing: %v", err)
	}
	var tg struct {
		Host, ServiceID, EnvTag, Audience                      string
		SnapshotID, PublicationID, PolicyDigest, ContentDigest string
		ArtifactDigest, PropertySetDigest                      string
		ReleaseVersion                                         int64
	}
	raw, err := os.ReadFile(filepath.Join(dir, "target.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &tg); err != nil {
		t.Fatal(err)
	}
	var hang *registrytest.FaultInjector
	reg := registrytest.New(t, registrytest.Options{Wrap: func(h http.Handler) http.Handler { hang = registrytest.NewFaultInjector(h); return hang }})
	t.Cleanup(hang.Release)
	rc, err := registry.New(registry.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := rc.Publish(context.Background(), registry.PublishRequest{
		Prefix: reg.Host + "/configpub",
		Artifacts: []registry.Artifact{{
			Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag, Audience: tg.Audience,
			SnapshotID: tg.SnapshotID, PublicationID: tg.PublicationID, PolicyDigest: tg.PolicyDigest,
			ContentDigest: tg.ContentDigest, ArtifactDigest: tg.ArtifactDigest, ReleaseVersion: tg.ReleaseVersion,
			CreatedAt: time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC), Values: values,
		}},
		Signer: signer,
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := sum.Results[0].Ref()
	keyFile := func(pub *ecdsa.PublicKey) string {
		b, err := signing.MarshalPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "cosign.pub")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		key     string
		exit    int
		outcome client.Outcome
		reason  client.Reason
		attach  bool // attach a signed delivery manifest first
	}{
		{"signed artifact without a delivery manifest", keyFile(&signer.PublicKey), exitFailClosed, client.OutcomeRejected, client.ReasonNoDeliveryManifest, false},
		{"signed artifact with its delivery manifest", keyFile(&signer.PublicKey), exitOK, client.OutcomeApplied, client.ReasonNewSnapshot, true},
		{"signed by an untrusted key", keyFile(&other.PublicKey), exitFailClosed, client.OutcomeRejected, client.ReasonUnsignedArtifact, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.attach {
				attachManifest(t, rc, ref, values, tg.SnapshotID, tg.PropertySetDigest, signer)
			}
			outFile := filepath.Join(t.TempDir(), "values.yml")
			out, err := runCLI("fetch", "--oci", ref, "--plain-http", "--host", tg.Host, "--service-id", tg.ServiceID,
				"--env", tg.EnvTag, "--config-audience", tg.Audience, "--trust-key", tc.key, "--out", outFile, "--cache-dir", t.TempDir())
			if code := exitCode(err); code != tc.exit {
				t.Fatalf("exit %d (%v), want %d\n%s", code, err, tc.exit, out)
			}
			ev := evidenceOf(t, out)
			if ev.Outcome != tc.outcome || ev.Reason != tc.reason || ev.Source != client.SourceOCI {
				t.Fatalf("got %s %s from %s, want %s %s from oci", ev.Outcome, ev.Reason, ev.Source, tc.outcome, tc.reason)
			}
			b, rerr := os.ReadFile(outFile)
			if tc.exit == exitOK && (rerr != nil || string(b) != string(values)) {
				t.Fatalf("--out does not hold the verified values.yml (%v)", rerr)
			}
			if tc.exit != exitOK && rerr == nil {
				t.Fatalf("--out written for a rejected artifact")
			}
		})
	}

	// Stopped (SIGTERM) during a slow pull, a runtime with a valid
	// last-known-good keeps it and its --out: the cache was restored after
	// the pull, with the cancelled context, and the run failed closed.
	t.Run("interrupted during a slow pull", func(t *testing.T) {
		outFile, cacheDir := filepath.Join(t.TempDir(), "values.yml"), t.TempDir()
		args := []string{"fetch", "--oci", ref, "--plain-http", "--host", tg.Host, "--service-id", tg.ServiceID,
			"--env", tg.EnvTag, "--config-audience", tg.Audience, "--trust-key", keyFile(&signer.PublicKey), "--out", outFile, "--cache-dir", cacheDir}
		if out, err := runCLI(args...); err != nil {
			t.Fatalf("first fetch: %v\n%s", err, out)
		}
		hang.SetHanging(true)
		defer hang.SetHanging(false)
		r := startCLI(t, args...)
		time.Sleep(500 * time.Millisecond) // the pull is held by the registry
		r.cancel()
		var err error
		select {
		case err = <-r.done:
		case <-time.After(20 * time.Second):
			t.Fatal("fetch did not end when interrupted")
		}
		if code := exitCode(err); code == exitFailClosed || code == exitOK {
			t.Fatalf("interrupted: exit %d (%v), want 1 (unavailable, the last-known-good current)\n%s", code, err, r.out.String())
		}
		if b, err := os.ReadFile(outFile); err != nil || string(b) != string(values) {
			t.Fatalf("--out after an interrupted fetch: %v, want the values.yml kept", err)
		}
	})
}

// attachManifest signs a delivery manifest for the artifact at ref (the
// golden values.yml), its lease around the real clock (the CLI uses it),
// and attaches it to the artifact as a referrer.
func attachManifest(t *testing.T, rc *registry.Client, ref string, values []byte, snapshotID, propertySetDigest string, key *ecdsa.PrivateKey) {
	t.Helper()
	var doc struct {
		Env bundle.RuntimePolicy `yaml:"runtimePolicy"`
	}
	if err := yaml.Unmarshal(values, &doc); err != nil {
		t.Fatal(err)
	}
	e := doc.Env
	now := time.Now().UTC().Truncate(time.Second)
	m := bundle.DeliveryManifest{
		Type: bundle.DeliveryManifestType, Host: e.Host, ServiceID: e.ServiceID, EnvTag: e.EnvTag, Audience: e.Audience,
		SnapshotID: snapshotID, PublicationID: e.PublicationID, PolicySnapshotID: e.PolicySnapshotID,
		ReleaseVersion: e.ReleaseVersion, ArtifactDigest: jcs.BytesDigest(values), ContentDigest: e.ContentDigest,
		PolicyDigest: e.PolicyDigest, PropertySetDigest: propertySetDigest, SchemaVersion: e.SchemaVersion,
		CompatibilityGeneration: e.CompatibilityGeneration, RevocationEpoch: e.RevocationEpoch, Sequence: 1,
		ActivatedAt: e.ValidFrom, IssuedAt: now.Format(time.RFC3339), ValidFrom: now.Add(-time.Minute).Format(time.RFC3339),
		RefreshAfter: now.Add(time.Minute).Format(time.RFC3339), ExpiresAt: now.Add(time.Hour).Format(time.RFC3339),
	}
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signing.SignBlob(key, mb)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := signing.KeyID(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.AttachDeliveryManifest(context.Background(), ref, registry.SignedDeliveryManifest{
		Manifest: mb, Signature: sig, KeyID: kid, Sequence: m.Sequence, IssuedAt: m.IssuedAt}); err != nil {
		t.Fatal(err)
	}
}

// TestFetchReloadHook: --exec runs after the first write of --out with the
// file and snapshot in its environment, not after an unchanged load, and
// --signal delivers its signal to the runtime's process.
func TestFetchReloadHook(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	cache, outFile, hookLog, sigLog := t.TempDir(), filepath.Join(dir, "values.yml"), filepath.Join(dir, "hook.log"), filepath.Join(dir, "sig.log")
	// A runtime that records each SIGUSR1 it receives.
	runtime := exec.Command("/bin/sh", "-c", `trap 'echo reload >> "$0"' USR1; echo ready >> "$0"; while :; do sleep 0.05; done`, sigLog)
	if err := runtime.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runtime.Process.Kill(); _ = runtime.Wait() })
	waitFile(t, sigLog, "ready\n")

	args := append(s.args(t, key, cache, outFile),
		"--exec", `echo "$CONFIGPUB_EVENT $CONFIGPUB_FILE $CONFIGPUB_SNAPSHOT_ID $CONFIGPUB_ARTIFACT_DIGEST" >> `+hookLog,
		"--signal", strconv.Itoa(runtime.Process.Pid)+":USR1")
	if out, err := runCLI(args...); err != nil {
		t.Fatalf("fetch: %v\n%s", err, out)
	}
	want := "applied " + outFile + " " + s.headers.Get("X-Config-Snapshot-Id") + " " + s.headers.Get("X-Artifact-Digest") + "\n"
	if got, _ := os.ReadFile(hookLog); string(got) != want {
		t.Fatalf("hook log after the first load: got %q, want %q", got, want)
	}
	waitFile(t, sigLog, "ready\nreload\n")
	if out, err := runCLI(args...); err != nil { // unchanged: no hook
		t.Fatalf("fetch: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond)
	if got, _ := os.ReadFile(hookLog); string(got) != want {
		t.Fatalf("hook log after an unchanged load: got %q, want only the first run", got)
	}
	if got, _ := os.ReadFile(sigLog); string(got) != "ready\nreload\n" {
		t.Fatalf("signals after an unchanged load: got %q, want one reload", got)
	}
	// A failing hook is reported.
	_ = os.Remove(outFile)
	failing := append(s.args(t, key, cache, outFile), "--exec", "exit 7")
	if out, err := runCLI(failing...); exitCode(err) != exitRefused || !strings.Contains(out+err.Error(), "reload hook") {
		t.Fatalf("failing hook: exit %d (%v), want 1 naming the reload hook\n%s", exitCode(err), err, out)
	}
	if _, err := runCLI(append(s.args(t, key, cache, outFile), "--signal", "0:HUP")...); exitCode(err) != exitUsage {
		t.Fatalf("--signal 0:HUP: exit %d, want a usage error", exitCode(err))
	}
}

// waitFile waits up to 5 s for path to hold want.
func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := os.ReadFile(path)
		if string(got) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %q, want %q", path, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFetchOutInAMissingDirectory: --out in a directory that does not
// exist is refused before anything is loaded, naming the directory. It was
// found after the load: the last-known-good and seen-state were persisted,
// --out could not be written, and the next run, finding nothing new,
// neither wrote nor reported it.
func TestFetchOutInAMissingDirectory(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	cache, missing := filepath.Join(dir, "cache"), filepath.Join(dir, "nodir")
	out, err := runCLI(s.args(t, key, cache, filepath.Join(missing, "values.yml"))...)
	if exitCode(err) != exitUsage || !strings.Contains(out+err.Error(), "directory "+missing+" does not exist") {
		t.Fatalf("fetch --out in a missing directory: exit %d (%v), want 2 naming %s\n%s", exitCode(err), err, missing, out)
	}
	if entries, _ := os.ReadDir(cache); len(entries) > 0 {
		t.Fatalf("the cache directory holds %d entries: something was loaded", len(entries))
	}
}

// reported returns the evidence reports received so far.
func (s *fetchServer) reported() []bundle.EvidenceReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bundle.EvidenceReport(nil), s.reports...)
}
