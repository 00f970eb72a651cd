package configserver_test

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
	"github.com/configpub/configpub/webhook"
)

// goldenAgents are the golden prod Agent targets: three runtimes of one
// host.
var goldenAgents = []string{"com.networknt.agent-account-1.0.0", "com.networknt.agent-advisor-1.0.0", "com.networknt.agent-tech-support-1.0.0"}

// goldenTarget returns the compiled golden prod target of serviceID as
// release 1 recorded it.
func goldenTarget(t testing.TB, serviceID string) promoter.Target {
	t.Helper()
	values, f := readGolden(t, serviceID)
	return f.promoterTarget(values)
}

// shiftedTarget is tg with its envelope's times (createdAt, validFrom,
// refreshAfter, expiresAt) and its recorded creation time and activation
// window moved by d, whole seconds: the same release compiled d later.
func shiftedTarget(t testing.TB, tg promoter.Target, d time.Duration) promoter.Target {
	t.Helper()
	if d == 0 {
		return tg
	}
	v := string(tg.Values)
	for _, field := range []string{"createdAt", "validFrom", "refreshAfter", "expiresAt"} {
		prefix := "\n  " + field + ": \""
		i := strings.Index(v, prefix)
		if i < 0 {
			t.Fatalf("golden values of %s lack %s", tg.ServiceID, field)
		}
		i += len(prefix)
		j := i + strings.IndexByte(v[i:], '"')
		at, err := bundle.ParseTime(v[i:j])
		if err != nil {
			t.Fatalf("golden values of %s: %s: %v", tg.ServiceID, field, err)
		}
		v = v[:i] + at.Add(d).Format(bundle.TimeFormat) + v[j:]
	}
	tg.Values = []byte(v)
	tg.ArtifactDigest = digest.FromBytes(tg.Values).String()
	tg.CreatedAt, tg.ValidFrom, tg.ExpiresAt = tg.CreatedAt.Add(d), tg.ValidFrom.Add(d), tg.ExpiresAt.Add(d)
	return tg
}

// asRelease2 is tg republished by release 2: the same policy content with
// release 2's publication in the envelope, so a new snapshot with new bytes.
func asRelease2(t testing.TB, tg promoter.Target) promoter.Target {
	t.Helper()
	pub := bundle.PublicationID(tg.EnvTag, 2)
	v := string(tg.Values)
	for _, r := range [][2]string{
		{"\n  publicationId: \"" + tg.PublicationID + "\"\n", "\n  publicationId: \"" + pub + "\"\n"},
		{"\n  releaseVersion: 1\n", "\n  releaseVersion: 2\n"},
		{"\n  sourceEventSequence: 1\n", "\n  sourceEventSequence: 2\n"},
	} {
		if !strings.Contains(v, r[0]) {
			t.Fatalf("golden values of %s lack %q", tg.ServiceID, r[0])
		}
		v = strings.Replace(v, r[0], r[1], 1)
	}
	tg.Values = []byte(v)
	tg.ArtifactDigest = digest.FromBytes(tg.Values).String()
	tg.SnapshotID, tg.PublicationID = uuid.NewString(), pub
	tg.ReleaseVersion, tg.SourceEventSequence = 2, 2
	return tg
}

// runtimeProc is one real runtime: a client of the Config Server and its
// control-plane status endpoint.
type runtimeProc struct {
	id     bundle.Identity
	c      *client.Client
	status *httptest.Server
}

// rollout is release 1 of the three golden Agents activated by the real
// promoter, release 2 staged for two-phase activation, the real Config
// Server, three runtimes running release 1, and a readback collector that
// asks them to prefetch (POST /prefetch) and records their answers.
type rollout struct {
	e          *env
	ps         *promoter.Store
	clock      *simclock.Clock
	r1, r2     []promoter.Target
	runtimes   []*runtimeProc
	col        *readback.Collector
	ctlKey     crypto.Signer
	ctlKeyPath string // ctlKey as a cosign.key file, password password
	receipts   *readback.Store
	owner      func(t *testing.T, sql string) int
	keyPath    string
	password   string
	promoterDB string
}

type rolloutOptions struct {
	notifier promoter.Notifier
	// serverURL returns the Config Server URL runtime i talks to (default:
	// the server itself).
	serverURL func(i int, srv string) string
	// start is the simulated clock's start, whole seconds (default: an
	// hour after the golden release was created); the golden targets'
	// times (created, activation window, refresh) move with it.
	start time.Time
}

func newRollout(t testing.TB, o rolloutOptions) *rollout {
	t.Helper()
	ctx := context.Background()
	start := goldenCreatedAt.Add(time.Hour)
	if !o.start.IsZero() {
		start = o.start
	}
	clock := simclock.New(start)
	r := &rollout{clock: clock, password: "two-phase"}
	r.e = newEnvTB(t, envOptions{handler: configserver.Options{Clock: clock.Now}})
	kp, err := cosignkey.GenerateKeyPair([]byte(r.password))
	if err != nil {
		t.Fatal(err)
	}
	if r.keyPath, _, err = cosignkey.WriteKeyPair(t.TempDir(), kp); err != nil {
		t.Fatal(err)
	}
	signer, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte(r.password))
	if err != nil {
		t.Fatal(err)
	}
	r.promoterDB = r.e.db.URLFor(t, "configpub_promoter")
	pool := r.e.db.PoolURL(t, r.promoterDB)
	r.ps, err = promoter.Open(ctx, pool, promoter.Options{Signer: signer, Clock: clock.Now, Notifier: o.notifier})
	if err != nil {
		t.Fatal(err)
	}
	owner := r.e.db.Pool(t)
	r.owner = func(t *testing.T, sql string) int {
		t.Helper()
		var n int
		if err := owner.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	for _, svc := range goldenAgents {
		tg := shiftedTarget(t, goldenTarget(t, svc), start.Sub(goldenCreatedAt.Add(time.Hour)))
		r.r1 = append(r.r1, tg)
		r.r2 = append(r.r2, asRelease2(t, tg))
	}
	if _, err := r.ps.RecordAndActivate(ctx, promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod",
		ReleaseVersion: 1, ManifestBytes: []byte("release 1\n"), Actor: "test", Reason: "release 1", Targets: r.r1}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ps.Stage(ctx, promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: 2,
		BaseReleaseVersion: 1, ManifestBytes: []byte("release 2\n"), Actor: "test", Reason: "release 2",
		Rollout: bundle.Rollout{Activation: bundle.ActivationTwoPhase}, Targets: r.r2}); err != nil {
		t.Fatal(err)
	}

	ctlPair, err := cosignkey.GenerateKeyPair([]byte(r.password))
	if err != nil {
		t.Fatal(err)
	}
	if r.ctlKeyPath, _, err = cosignkey.WriteKeyPair(t.TempDir(), ctlPair); err != nil {
		t.Fatal(err)
	}
	ctlKey, err := cosignkey.LoadPrivateKey(ctlPair.PrivatePEM, []byte(r.password))
	if err != nil {
		t.Fatal(err)
	}
	ctlTrusted := ctlKey.TrustedKey()
	for i, tg := range r.r1 {
		id := bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}
		waitServed(t, r.e, id, tg.Audience, tg.SnapshotID)
		url := r.e.srv.URL
		if o.serverURL != nil {
			url = o.serverURL(i, url)
		}
		tok := r.e.token(t, id, tg.Audience)
		c, err := client.New(client.Options{ServerURL: url, Identity: id, Audience: tg.Audience,
			TokenSource: func(context.Context) (string, error) { return tok, nil },
			TrustedKeys: []signing.TrustedKey{signer.TrustedKey()}, Clock: clock, CacheDir: t.TempDir(), Skew: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := c.Load(ctx); err != nil || ev.SnapshotID != tg.SnapshotID {
			t.Fatalf("runtime %s: load release 1: %+v, %v", id, ev, err)
		}
		h, err := c.StatusHandler(client.StatusOptions{ControlKeys: []signing.TrustedKey{ctlTrusted}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		r.runtimes = append(r.runtimes, &runtimeProc{id: id, c: c, status: srv})
	}
	r.ctlKey = ctlKey
	if r.col, err = readback.NewCollector(readback.Options{Signer: ctlKey, Prefetch: true, Now: clock.Now}); err != nil {
		t.Fatal(err)
	}
	r.receipts = readback.NewStore(pool)
	return r
}

// readback asks the runtimes at idx to prefetch and records their answers.
func (r *rollout) readback(t *testing.T, idx ...int) []readback.Result {
	t.Helper()
	var targets []readback.Target
	for _, i := range idx {
		rt := r.runtimes[i]
		targets = append(targets, readback.Target{Endpoint: rt.status.URL, Host: rt.id.Host, ServiceID: rt.id.ServiceID, EnvTag: rt.id.EnvTag})
	}
	res, err := readback.Run(context.Background(), r.col, r.receipts, targets)
	if err != nil {
		t.Fatalf("readback: %v (%+v)", err, res)
	}
	return res
}

// pointers returns the snapshot of every identity's current pointer.
func (r *rollout) pointersAt(t *testing.T, want []promoter.Target) {
	t.Helper()
	for _, tg := range want {
		q := "SELECT count(*) FROM configpub.current_pointer WHERE env_tag = 'prod' AND host = '" + tg.Host +
			"' AND service_id = '" + tg.ServiceID + "' AND snapshot_id = '" + tg.SnapshotID + "'"
		if r.owner(t, q) != 1 {
			t.Fatalf("%s/%s is not at snapshot %s (release %d)", tg.Host, tg.ServiceID, tg.SnapshotID, tg.ReleaseVersion)
		}
	}
}

func activateInput() promoter.MoveInput {
	return promoter.MoveInput{CommandID: uuid.NewString(), EnvTag: "prod", Release: 2, Actor: "ops", Reason: "two-phase"}
}

// TestTwoPhaseRealRuntimesPrefetchReadyThenActivate: release 2 is staged;
// the Config Server serves each runtime its candidate with a signed
// candidate manifest; three real runtimes prefetch and fully verify it when
// the readback collector asks (POST /prefetch), and the collector records
// READY receipts for exactly release 2's snapshots. The two-phase activation
// then moves every pointer in one transaction, and each runtime loads
// release 2 (its seen floor untouched by the prefetch). A candidate
// manifest replayed on a runtime's current path is refused
// (MANIFEST_PHASE_MISMATCH) and the runtime keeps release 1.
func TestTwoPhaseRealRuntimesPrefetchReadyThenActivate(t *testing.T) {
	t.Parallel()
	r := newRollout(t, rolloutOptions{})
	ctx := context.Background()

	// The candidate answer carries a candidate manifest; replayed as a
	// current answer, the runtime refuses it.
	var candResp *http.Response
	var candBody []byte
	tok := r.e.token(t, r.runtimes[0].id, r.r2[0].Audience)
	candResp, candBody = r.e.do(t, http.MethodGet, configsPath(r.runtimes[0].id)+"&configPhase=candidate", tok)
	if candResp.StatusCode != http.StatusOK || candResp.Header.Get(client.HeaderManifest) == "" {
		t.Fatalf("candidate: got %d with manifest %q, want 200 with a candidate manifest", candResp.StatusCode, candResp.Header.Get(client.HeaderManifest))
	}
	replay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range candResp.Header {
			w.Header()[k] = v
		}
		_, _ = w.Write(candBody)
	}))
	defer replay.Close()
	rt0 := r.runtimes[0]
	replayed, err := client.New(client.Options{ServerURL: replay.URL, Identity: rt0.id, Audience: r.r1[0].Audience,
		TrustedKeys: rt0trusted(t, r), Clock: r.clock, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := replayed.Load(ctx); err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonManifestPhase {
		t.Fatalf("candidate manifest replayed on a load: got %+v, %v; want REJECTED %s", ev, err, client.ReasonManifestPhase)
	}

	res := r.readback(t, 0, 1, 2)
	for i, rr := range res {
		if rr.Status == nil || rr.Status.Candidate == nil || rr.Status.Candidate.Result != bundle.ResultReady ||
			rr.Status.Candidate.SnapshotID != r.r2[i].SnapshotID || rr.Recorded == 0 {
			t.Fatalf("runtime %d readback: %+v, want READY for %s recorded", i, rr, r.r2[i].SnapshotID)
		}
		if st := r.runtimes[i].c.Status(); st.Current.SnapshotID != r.r1[i].SnapshotID {
			t.Fatalf("runtime %d runs %s after the prefetch, want release 1", i, st.Current.SnapshotID)
		}
	}
	got, err := r.ps.CandidateReceipts(ctx, "prod", 2)
	if err != nil || len(got) != 3 {
		t.Fatalf("candidate receipts: %+v, %v; want 3", got, err)
	}
	for _, c := range got {
		found := false
		for _, tg := range r.r2 {
			found = found || (c.ServiceID == tg.ServiceID && c.SnapshotID == tg.SnapshotID && c.Result == promoter.CandidateReady)
		}
		if !found {
			t.Fatalf("receipt %+v is not READY for its release-2 snapshot", c)
		}
	}
	r.pointersAt(t, r.r1)

	act, err := r.ps.ActivateRelease(ctx, activateInput(), promoter.ActivateOptions{Timeout: 10 * time.Second, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if act.Moved != 3 {
		t.Fatalf("moved %d, want 3", act.Moved)
	}
	r.pointersAt(t, r.r2)
	if n := r.owner(t, `SELECT count(DISTINCT (command_id, moved_at)) FROM configpub.pointer_move WHERE release_version = 2`); n != 1 {
		t.Fatalf("release 2's moves span %d (command, time) pairs, want 1 transaction", n)
	}
	if n := r.owner(t, `SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2`); n != 3 {
		t.Fatalf("%d moves for release 2, want 3", n)
	}
	for i, rt := range r.runtimes {
		waitServed(t, r.e, rt.id, r.r2[i].Audience, r.r2[i].SnapshotID)
		if ev, err := rt.c.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied || ev.SnapshotID != r.r2[i].SnapshotID {
			t.Fatalf("runtime %d load after activation: %+v, %v; want release 2 APPLIED", i, ev, err)
		}
	}
	if resp, _ := r.e.do(t, http.MethodGet, configsPath(rt0.id)+"&configPhase=candidate", tok); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("candidate after activation: %d, want 404", resp.StatusCode)
	}
}

// rt0trusted returns the delivery-manifest key the runtimes trust.
func rt0trusted(t *testing.T, r *rollout) []signing.TrustedKey {
	t.Helper()
	signer, err := cosignkey.LoadPrivateKeyFile(r.keyPath, []byte(r.password))
	if err != nil {
		t.Fatal(err)
	}
	return []signing.TrustedKey{signer.TrustedKey()}
}

// webhookSink is a real webhook receiver that checks every delivery's HMAC.
type webhookSink struct {
	mu     sync.Mutex
	kinds  []string
	forged int
	srv    *httptest.Server
}

func newWebhookSink(t *testing.T, secret []byte) *webhookSink {
	s := &webhookSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := webhook.Verify(secret, req.Header.Get(webhook.HeaderTimestamp), body, req.Header.Get(webhook.HeaderSignature)); err != nil {
			s.forged++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil || p.Text == "" || p.Event.Kind != req.Header.Get(webhook.HeaderEvent) {
			s.forged++
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.kinds = append(s.kinds, p.Event.Kind)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *webhookSink) received() (kinds []string, forged int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.kinds...), s.forged
}

// TestTwoPhaseRealRejectedCandidateFailsTheRelease: the second runtime's
// candidate arrives with one byte flipped in transit (a proxy between it
// and the Config Server); it REJECTS it and the collector records the
// REJECTED receipt. The activation marks release 2 FAILED, moves no
// pointer, and a real webhook receiver gets the rejection and the failure,
// each with a valid HMAC.
func TestTwoPhaseRealRejectedCandidateFailsTheRelease(t *testing.T) {
	t.Parallel()
	secret := []byte("two-phase webhook secret")
	sink := newWebhookSink(t, secret)
	n, err := webhook.New(webhook.Options{URLs: []string{sink.srv.URL}, Secret: secret, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var upstream atomic.Value // the Config Server's URL
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		out, _ := http.NewRequestWithContext(req.Context(), req.Method, upstream.Load().(string)+req.URL.RequestURI(), req.Body)
		out.Header = req.Header.Clone()
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if req.URL.Query().Get("configPhase") == "candidate" && len(body) > 0 {
			body[len(body)/2] ^= 1
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	defer proxy.Close()
	r := newRollout(t, rolloutOptions{notifier: n, serverURL: func(i int, srv string) string {
		upstream.Store(srv)
		if i == 1 {
			return proxy.URL
		}
		return srv
	}})
	ctx := context.Background()

	res := r.readback(t, 0, 1, 2)
	if c := res[1].Status.Candidate; c == nil || c.Result != bundle.ResultRejected || c.SnapshotID != r.r2[1].SnapshotID {
		t.Fatalf("tampered runtime: candidate %+v, want REJECTED for %s", c, r.r2[1].SnapshotID)
	}
	if c := res[0].Status.Candidate; c == nil || c.Result != bundle.ResultReady {
		t.Fatalf("intact runtime: candidate %+v, want READY", c)
	}
	_, err = r.ps.ActivateRelease(ctx, activateInput(), promoter.ActivateOptions{Timeout: 10 * time.Second, Poll: 50 * time.Millisecond})
	var rej *promoter.RejectedError
	if !errors.As(err, &rej) || rej.Identity != r.runtimes[1].id.Host+"/"+r.runtimes[1].id.ServiceID || rej.SnapshotID != r.r2[1].SnapshotID {
		t.Fatalf("activate: %v, want the second runtime's rejection", err)
	}
	r.pointersAt(t, r.r1)
	if n := r.owner(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 0 {
		t.Fatalf("%d pointer moves for the failed release", n)
	}
	if n := r.owner(t, "SELECT count(*) FROM configpub.config_release WHERE release_version = 2 AND lifecycle_state = 'FAILED'"); n != 1 {
		t.Fatal("release 2 is not FAILED")
	}
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	// Each event is delivered on its own (webhook: arrival order is not
	// guaranteed; events carry their time), so both are looked for, in
	// any order.
	kinds, forged := sink.received()
	if forged != 0 || !slices.Contains(kinds, promoter.EventRejected) || !slices.Contains(kinds, promoter.EventFailed) {
		t.Fatalf("webhook received %v (%d failing the HMAC check), want the rejection and the failure", kinds, forged)
	}
	tok := r.e.token(t, r.runtimes[0].id, r.r2[0].Audience)
	if resp, _ := r.e.do(t, http.MethodGet, configsPath(r.runtimes[0].id)+"&configPhase=candidate", tok); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("candidate of a FAILED release: %d, want 404", resp.StatusCode)
	}
}

// TestTwoPhaseRealMissingRuntimeTimesOut: two runtimes prefetch and are
// READY; the third never answers (its status endpoint is gone). The
// activation, through the library and through `configpub activate`,
// times out naming exactly the missing identity; the CLI exits 1; nothing
// moved.
func TestTwoPhaseRealMissingRuntimeTimesOut(t *testing.T) {
	t.Parallel()
	r := newRollout(t, rolloutOptions{start: time.Now().UTC().Truncate(time.Second)}) // the configpub binary below runs by the wall clock
	ctx := context.Background()
	r.readback(t, 0, 1)
	r.runtimes[2].status.Close()
	if _, err := readback.Run(ctx, r.col, r.receipts, []readback.Target{{Endpoint: r.runtimes[2].status.URL,
		Host: r.runtimes[2].id.Host, ServiceID: r.runtimes[2].id.ServiceID, EnvTag: "prod"}}); err == nil {
		t.Fatal("readback of a runtime that is gone succeeded")
	}
	missing := r.runtimes[2].id.Host + "/" + r.runtimes[2].id.ServiceID
	_, err := r.ps.ActivateRelease(ctx, activateInput(), promoter.ActivateOptions{Timeout: 500 * time.Millisecond, Poll: 50 * time.Millisecond})
	var nr *promoter.NotReadyError
	if !errors.As(err, &nr) || strings.Join(nr.Missing, ",") != missing || nr.Ready != 2 {
		t.Fatalf("activate: %v, want a timeout naming %s only", err, missing)
	}
	r.pointersAt(t, r.r1)

	if testing.Short() {
		return
	}
	bin := buildConfigpub(t)
	cmd := exec.CommandContext(ctx, bin, "activate", "--env", "prod", "--release", "2", "--actor", "ops", "--reason", "two-phase",
		"--database", r.promoterDB, "--key", r.keyPath, "--command-id", uuid.NewString(), "--timeout", "2s")
	cmd.Env = append(os.Environ(), cosignkey.PasswordEnv+"="+r.password)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("configpub activate: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"2/3 candidates READY", missing, "nothing moved"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("configpub activate output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.Contains(line, "not READY after") {
			continue
		}
		for _, ready := range r.runtimes[:2] {
			if strings.Contains(line, ready.id.Host+"/"+ready.id.ServiceID) {
				t.Errorf("the refusal names READY runtime %s as missing: %s", ready.id, line)
			}
		}
	}
	r.pointersAt(t, r.r1)
}

// buildConfigpub builds the configpub command into a temporary directory
// and returns its path.
func buildConfigpub(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "configpub")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/configpub").CombinedOutput(); err != nil {
		t.Fatalf("build configpub: %v\n%s", err, out)
	}
	return bin
}
