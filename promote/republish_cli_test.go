package promote_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// exec runs the built binary with args and COSIGN_PASSWORD set, and
// returns its exit code, stdout and stderr. It may run in goroutines of a
// test (a process that cannot be started is an error, not a stop).
func (c *cliHarness) exec(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = append(os.Environ(), cosignkey.PasswordEnv+"="+c.Password, "CONFIGPUB_DATABASE_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	default:
		t.Errorf("run configpub %s: %v", args[0], err)
		return -1, "", ""
	}
}

// configServer starts a real Config Server over the harness's database
// (as configpub_server) and returns its URL and a function writing a
// token file for one target.
func configServer(t *testing.T, h *promotertest.Harness) (string, func(host, service, audience string) string) {
	t.Helper()
	st, err := pgstore.New(h.DB.PoolURL(t, h.DB.URLFor(t, "configpub_server")), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tokenKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := auth.Thumbprint(tokenKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	const iss, aud = "https://issuer.configpub.test", "configpub-server"
	v, err := auth.NewVerifier(auth.NewStaticKeys([]auth.Key{{ID: kid, Algorithm: auth.ES256, Public: tokenKey.Public()}}),
		auth.Options{Issuer: iss, Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(configserver.NewHandler(st, configserver.Options{Verifier: v}))
	t.Cleanup(srv.Close)
	return srv.URL, func(host, service, audience string) string {
		tok, err := auth.Mint(tokenKey, auth.MintOptions{Issuer: iss, Audience: aud, Host: host, ServiceID: service,
			EnvTag: promotertest.Env, ConfigAudience: audience, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(p, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// TestRepublishCLI runs the built binary: after releases 1 and 2 are
// promoted to registry A, `registry republish` into an empty registry B
// pushes every target of the active release with the store's digests
// (-o json); `verify-oci` accepts each; a runtime's `fetch --oci` from
// B (the delivery manifest republish attached) and `fetch --oci --server`
// (the Config Server's) apply each target's exact bytes; a second run
// pushes nothing and writes nothing to B; a target whose stored bytes were
// altered is refused by name with exit 1 and nothing pushed for it.
func TestRepublishCLI(t *testing.T) {
	c := newCLIHarness(t)
	ctx := context.Background()
	if _, err := c.Promote(t, c.Options(c.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	if _, err := c.Promote(t, c.Options(c.Repo.R2)); err != nil {
		t.Fatalf("promote release 2: %v", err)
	}
	ts := storedTargets(t, c.Harness, 2)
	dbURL := c.DB.URLFor(t, "configpub_promoter")
	pub := filepath.Join(filepath.Dir(c.KeyPath), cosignkey.PublicKeyFile)
	b := registrytest.New(t, registrytest.Options{})
	prefixB := b.Host + "/configpub"
	republish := func(prefix string, extra ...string) (int, string, string) {
		return c.exec(t, append([]string{"registry", "republish", "--env", promotertest.Env, "--registry", prefix,
			"--key", c.KeyPath, "--database", dbURL, "--plain-http"}, extra...)...)
	}

	code, out, errOut := republish(prefixB, "-o", "json")
	var rep struct {
		EnvTag         string `json:"envTag"`
		Release        int64  `json:"release"`
		Active         bool   `json:"active"`
		Registry       string `json:"registry"`
		KeyID          string `json:"keyId"`
		Targets        int    `json:"targets"`
		Pushed         int    `json:"pushed"`
		AlreadyPresent int    `json:"alreadyPresent"`
		Signed         int    `json:"signed"`
		BytesUploaded  int64  `json:"bytesUploaded"`
		RefusedCount   int    `json:"refusedCount"`
		SkippedCount   int    `json:"skippedCount"`
		Attach         struct {
			AttachedCount int `json:"attachedCount"`
		} `json:"attach"`
	}
	if code != 0 {
		t.Fatalf("registry republish -o json: exit %d\n%s\n%s", code, out, errOut)
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("registry republish -o json: %v\n%s", err, out)
	}
	if rep.EnvTag != promotertest.Env || rep.Release != 2 || !rep.Active || rep.Registry != prefixB || rep.KeyID != c.Signer.KeyID() ||
		rep.Targets != len(ts) || rep.Pushed != len(ts) || rep.Signed != len(ts) || rep.AlreadyPresent != 0 || rep.BytesUploaded == 0 ||
		rep.RefusedCount != 0 || rep.SkippedCount != 0 || rep.Attach.AttachedCount != len(ts) {
		t.Fatalf("registry republish -o json: %+v, want %d targets pushed, signed and attached", rep, len(ts))
	}
	checkRepublished(t, c.Harness, prefixB, ts)

	serverURL, token := configServer(t, c.Harness)
	for _, s := range ts {
		repo := registry.Repository(prefixB, registry.Artifact{EnvTag: promotertest.Env, Host: s.host, ServiceID: s.service})
		ref := repo + "@" + s.manifestDigest
		if code, out, errOut := c.exec(t, "verify-oci", ref, "--plain-http", "--key", pub, "--host", s.host, "--service-id", s.service,
			"--env-tag", promotertest.Env); code != 0 {
			t.Errorf("verify-oci %s: exit %d\n%s%s", ref, code, out, errOut)
		}
		var audience string
		if err := c.Pool.QueryRow(ctx, `SELECT audience FROM configpub.config_snapshot WHERE snapshot_id = $1`, s.snapshot).Scan(&audience); err != nil {
			t.Fatal(err)
		}
		for _, server := range [][]string{nil, {"--server", serverURL, "--token-file", token(s.host, s.service, audience)}} {
			outFile := filepath.Join(t.TempDir(), "values.yml")
			args := append([]string{"fetch", "--oci", ref, "--plain-http", "--host", s.host, "--service-id", s.service, "--env", promotertest.Env,
				"--config-audience", audience, "--trust-key", pub, "--cache-dir", t.TempDir(), "--out", outFile}, server...)
			code, out, errOut := c.exec(t, args...)
			got, err := os.ReadFile(outFile)
			if code != 0 || err != nil || !bytes.Equal(got, s.values) {
				t.Errorf("fetch --oci %s %v: exit %d, --out equal to the store's bytes: %v (%v)\n%s%s", ref, server, code, bytes.Equal(got, s.values), err, out, errOut)
			}
		}
	}

	b.Reset()
	code, out, errOut = republish(prefixB)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("0 pushed, %d already present and signed", len(ts))) {
		t.Fatalf("registry republish again: exit %d\n%s%s", code, out, errOut)
	}
	if n := b.Writes(); n != 0 {
		t.Fatalf("registry republish again wrote %d times to the registry, want 0", n)
	}

	bad := ts[len(ts)-1]
	tx, err := c.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, q := range []string{
		`SET LOCAL session_replication_role = replica`,
		`DO $$ DECLARE c text; BEGIN
			FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'configpub.artifact'::regclass AND contype = 'c' LOOP
				EXECUTE format('ALTER TABLE configpub.artifact DROP CONSTRAINT %I', c);
			END LOOP;
		END $$`,
		`UPDATE configpub.artifact SET bytes = overlay(bytes placing '#'::bytea from 1) WHERE artifact_digest =
			(SELECT artifact_digest FROM configpub.config_snapshot WHERE snapshot_id = '` + bad.snapshot + `')`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("tamper: %v", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	d := registrytest.New(t, registrytest.Options{})
	code, out, errOut = republish(d.Host + "/configpub")
	id := bad.host + "/" + bad.service
	if code != 1 || !strings.Contains(out, "1 REFUSED, nothing pushed for them ("+id+"; first: "+id) ||
		!strings.Contains(errOut, "artifacts not republished") || !strings.Contains(errOut, id) {
		t.Fatalf("registry republish of a tampered store: exit %d, want 1 naming %s\n%s%s", code, id, out, errOut)
	}
	repo := registry.Repository(d.Host+"/configpub", registry.Artifact{EnvTag: promotertest.Env, Host: bad.host, ServiceID: bad.service})
	if got, err := resolveTag(ctx, repo, registry.Tag(bad.release)); err == nil {
		t.Fatalf("%s: tag %s names %s after the refusal, want nothing pushed", repo, registry.Tag(bad.release), got)
	}
}
