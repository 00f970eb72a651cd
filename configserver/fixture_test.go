package configserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/syncbuf"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/pointernote"
	"github.com/configpub/configpub/internal/signing"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	issuer   = "https://issuer.configpub.test"
	audience = "configpub-server"
)

// snapshot is one seeded config_snapshot row with its bytes.
type snapshot struct {
	ID, PublicationID, PolicySnapshotID         string
	Identity                                    bundle.Identity
	Audience                                    string
	ReleaseVersion                              int64
	ArtifactDigest, ContentDigest, PolicyDigest string
	PropertySetDigest                           string
	CompatibilityGeneration, RevocationEpoch    int64
	Body                                        []byte
}

// pointerState is what a seeded pointer move stored.
type pointerState struct {
	Manifest  []byte
	Signature string
	KeyID     string
	Parsed    *bundle.DeliveryManifest
}

// seeder writes rows as the database owner, the way the promoter will:
// immutable artifact and snapshot rows, then a pointer move that stores a
// signed delivery manifest and NOTIFYs in the same transaction.
type seeder struct {
	owner   *pgxpool.Pool
	signer  *ecdsa.PrivateKey
	trusted []signing.TrustedKey

	mu  sync.Mutex
	seq map[bundle.Identity]int64
}

func newSeeder(t testing.TB, owner *pgxpool.Pool) *seeder {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := signing.NewTrustedKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &seeder{owner: owner, signer: k, trusted: []signing.TrustedKey{tk}, seq: map[bundle.Identity]int64{}}
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// publish stores an artifact and a snapshot for id.
func (s *seeder) publish(t testing.TB, id bundle.Identity, aud string, release int64, body []byte) *snapshot {
	t.Helper()
	sn := &snapshot{
		ID: uuid.NewString(), PublicationID: uuid.NewString(), PolicySnapshotID: uuid.NewString(),
		Identity: id, Audience: aud, ReleaseVersion: release,
		ArtifactDigest: digestOf(body), ContentDigest: digestOf(append([]byte("content"), body...)),
		PolicyDigest: digestOf(append([]byte("policy"), body...)), PropertySetDigest: digestOf([]byte("props")),
		Body: body,
	}
	s.insert(t, sn)
	return sn
}

// insert stores sn's artifact and snapshot rows.
func (s *seeder) insert(t testing.TB, sn *snapshot) {
	t.Helper()
	id, aud, release, body := sn.Identity, sn.Audience, sn.ReleaseVersion, sn.Body
	ctx := context.Background()
	_, err := s.owner.Exec(ctx, `INSERT INTO configpub.artifact (artifact_digest, media_type, bytes, size)
		VALUES ($1, 'application/yaml', $2, $3) ON CONFLICT DO NOTHING`, sn.ArtifactDigest, body, len(body))
	if err != nil {
		t.Fatalf("seed artifact: %v", err)
	}
	_, err = s.owner.Exec(ctx, `INSERT INTO configpub.config_snapshot (snapshot_id, host, service_id, env_tag, audience,
		publication_id, policy_snapshot_id, policy_version, release_version, artifact_digest, content_digest,
		policy_digest, property_set_digest, schema_version, compatibility_generation, revocation_epoch, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, $11, $12, 1, $13, $14, now())`,
		sn.ID, id.Host, id.ServiceID, id.EnvTag, aud, sn.PublicationID, sn.PolicySnapshotID, release,
		sn.ArtifactDigest, sn.ContentDigest, sn.PolicyDigest, sn.PropertySetDigest,
		sn.CompatibilityGeneration, sn.RevocationEpoch)
	if err != nil {
		t.Fatalf("seed snapshot: %v", err)
	}
}

// move points id at sn: signs a delivery manifest, upserts current_pointer,
// appends delivery_manifest and NOTIFYs, in one transaction.
func (s *seeder) move(t testing.TB, sn *snapshot) *pointerState {
	t.Helper()
	return s.moveAt(t, sn, time.Now().UTC().Truncate(time.Second), 5*time.Minute, time.Hour)
}

// moveAt is move with a manifest issued at now with the given lease.
func (s *seeder) moveAt(t testing.TB, sn *snapshot, now time.Time, refresh, expire time.Duration) *pointerState {
	t.Helper()
	return s.moveManyAt(t, []*snapshot{sn}, now, refresh, expire)[0]
}

// moveManyAt moves every pointer of sns in one transaction (one NOTIFY
// each), as an activation of a whole release does.
func (s *seeder) moveManyAt(t testing.TB, sns []*snapshot, now time.Time, refresh, expire time.Duration) []*pointerState {
	t.Helper()
	var out []*pointerState
	batch := &pgx.Batch{}
	for _, sn := range sns {
		s.mu.Lock()
		s.seq[sn.Identity]++
		seq := s.seq[sn.Identity]
		s.mu.Unlock()
		m := &bundle.DeliveryManifest{
			Type: bundle.DeliveryManifestType, Host: sn.Identity.Host, ServiceID: sn.Identity.ServiceID,
			EnvTag: sn.Identity.EnvTag, Audience: sn.Audience, SnapshotID: sn.ID, PublicationID: sn.PublicationID,
			PolicySnapshotID: sn.PolicySnapshotID, ReleaseVersion: sn.ReleaseVersion, ArtifactDigest: sn.ArtifactDigest,
			ContentDigest: sn.ContentDigest, PolicyDigest: sn.PolicyDigest, PropertySetDigest: sn.PropertySetDigest,
			SchemaVersion: 1, CompatibilityGeneration: sn.CompatibilityGeneration, RevocationEpoch: sn.RevocationEpoch,
			Sequence: seq, IssuedAt: now.Format(time.RFC3339),
			ValidFrom: now.Format(time.RFC3339), RefreshAfter: now.Add(refresh).Format(time.RFC3339),
			ExpiresAt: now.Add(expire).Format(time.RFC3339),
		}
		raw, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		sig, err := signing.SignBlob(s.signer, raw)
		if err != nil {
			t.Fatal(err)
		}
		ps := &pointerState{Manifest: raw, Signature: sig, KeyID: s.trusted[0].ID, Parsed: m}
		out = append(out, ps)
		payload, _ := json.Marshal(pointernote.Note{Host: sn.Identity.Host, ServiceID: sn.Identity.ServiceID,
			EnvTag: sn.Identity.EnvTag, SnapshotID: sn.ID, Sequence: seq})
		batch.Queue(`INSERT INTO configpub.current_pointer (host, service_id, env_tag, snapshot_id,
			release_version, sequence, manifest, manifest_signature, manifest_key_id, lease_valid_from,
			lease_refresh_after, lease_expires_at, moved_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now(), now())
			ON CONFLICT (host, service_id, env_tag) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id,
			release_version = EXCLUDED.release_version, sequence = EXCLUDED.sequence, manifest = EXCLUDED.manifest,
			manifest_signature = EXCLUDED.manifest_signature, manifest_key_id = EXCLUDED.manifest_key_id,
			lease_valid_from = EXCLUDED.lease_valid_from, lease_refresh_after = EXCLUDED.lease_refresh_after,
			lease_expires_at = EXCLUDED.lease_expires_at, moved_at = now(), updated_at = now()`,
			sn.Identity.Host, sn.Identity.ServiceID, sn.Identity.EnvTag, sn.ID, sn.ReleaseVersion, seq, raw, sig,
			ps.KeyID, now, now.Add(refresh), now.Add(expire))
		batch.Queue(`INSERT INTO configpub.delivery_manifest (host, service_id, env_tag, sequence,
			issued_at, snapshot_id, manifest, signature, key_id, expires_at, kind)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'move')`,
			sn.Identity.Host, sn.Identity.ServiceID, sn.Identity.EnvTag, seq, now, sn.ID, raw, sig, ps.KeyID,
			now.Add(expire))
		batch.Queue(pointernote.SendSQL, string(payload))
	}
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, s.owner, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		t.Fatalf("seed pointer moves: %v", err)
	}
	return out
}

// env is a running Config Server over a real database.
type env struct {
	db       *pgtest.DB
	seed     *seeder
	store    *pgstore.Store
	srv      *httptest.Server
	handler  http.Handler
	verifier *auth.Verifier
	tokenKey *ecdsa.PrivateKey
	logs     *syncbuf.Buffer
	// clock is the handler's clock when envOptions set none (runOn):
	// nil, the wall clock.
	clock atomic.Pointer[func() time.Time]
}

// now is the handler's clock when envOptions set none: the one runOn
// gave, else the wall clock.
func (e *env) now() time.Time {
	if f := e.clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// runOn makes the server tell the time by clock from now on (unless
// envOptions gave the handler a clock): a test that signs leases on a
// simulated clock serves them on it too, as production runs the signer
// and the servers on synchronized clocks — a server on the wall clock
// answers 503 lease_ended for a lease signed months ago in simulated time.
func (e *env) runOn(clock func() time.Time) { e.clock.Store(&clock) }

type envOptions struct {
	storeURL string // default: a configpub_server member of a fresh pgtest database
	owner    *pgxpool.Pool
	store    pgstore.Options
	handler  configserver.Options
	noWait   bool
	// keys, when set, is the token verifier's key source around the
	// env's token key (default: that key alone, fixed).
	keys func(auth.Key) auth.KeySource
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	return newEnvTB(t, o)
}

func newEnvTB(t testing.TB, o envOptions) *env {
	t.Helper()
	e := &env{logs: &syncbuf.Buffer{}}
	if o.storeURL == "" {
		e.db = pgtest.New(t)
		o.storeURL = e.db.URLFor(t, "configpub_server")
		o.owner = e.db.Pool(t)
	}
	e.seed = newSeeder(t, o.owner)
	poolCfg, err := pgstore.PoolConfig(o.storeURL, o.store)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), poolCfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := pgstore.New(pool, o.store)
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; pool.Close() })

	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e.tokenKey = k
	kid, err := auth.Thumbprint(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	key := auth.Key{ID: kid, Algorithm: auth.ES256, Public: k.Public()}
	var keys auth.KeySource = auth.NewStaticKeys([]auth.Key{key})
	if o.keys != nil {
		keys = o.keys(key)
	}
	v, err := auth.NewVerifier(keys, auth.Options{Issuer: issuer, Audience: audience})
	if err != nil {
		t.Fatal(err)
	}
	e.verifier = v
	hopts := o.handler
	hopts.Verifier = v
	if hopts.Clock == nil {
		hopts.Clock = e.now
	}
	if hopts.Logger == nil {
		hopts.Logger = newJSONLogger(e.logs)
	}
	e.handler = configserver.NewHandler(st, hopts)
	e.srv = httptest.NewServer(e.handler)
	t.Cleanup(e.srv.Close)
	if !o.noWait {
		e.waitReady(t, 10*time.Second)
	}
	return e
}

func (e *env) waitReady(t testing.TB, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if e.store.Ready(context.Background()) == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("store not ready within %s", d)
}

// token mints a workload token for id.
func (e *env) token(t testing.TB, id bundle.Identity, aud string) string {
	t.Helper()
	tok, err := auth.Mint(e.tokenKey, auth.MintOptions{Issuer: issuer, Audience: audience, Host: id.Host,
		ServiceID: id.ServiceID, EnvTag: id.EnvTag, ConfigAudience: aud, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// get performs a request with an optional bearer token and extra headers.
func (e *env) do(t testing.TB, method, path, token string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return doURL(t, e.srv.Client(), method, e.srv.URL+path, token, hdr...)
}

func doURL(t testing.TB, c *http.Client, method, url, token string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var buf []byte
	buf, err = readAll(resp)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp, buf
}

func configsPath(id bundle.Identity) string {
	return fmt.Sprintf("/configs?host=%s&serviceId=%s&envTag=%s", id.Host, id.ServiceID, id.EnvTag)
}

// serve runs e.handler in configserver.Serve on a loopback port (the real
// server with its timeouts and header limits) and returns its base URL.
func (e *env) serve(t testing.TB, opts configserver.ServerOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- configserver.Serve(ctx, ln, e.handler, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
