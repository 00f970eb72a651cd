package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/fixtures"
	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/pgcluster"
)

// Options configure a demo run. The zero value runs the standard demo.
type Options struct {
	// Dir holds all state: database, registry storage, keys, the policy
	// repository, runtime caches and service logs. Default ".configpub/demo".
	// It is wiped at the start of every run.
	Dir string
	// Binary is the configpub executable run for each step. Default: the
	// running executable.
	Binary string
	// Out receives the narration. Default os.Stdout.
	Out io.Writer
	// Policy is the policy repository to start from. Default: the embedded
	// fixtures/policy-repo.
	Policy fs.FS
	// EnvTag is the environment promoted. Default "dev".
	EnvTag string
	// Keep leaves PostgreSQL, the registry, the Config Server and the
	// operator console running after the demo until ctx ends (Ctrl-C).
	Keep bool
}

const (
	cosignPassword = "configpub-demo"
	issuer         = "https://issuer.demo.configpub.local"
	tokenAudience  = "configpub-demo"
	registryPrefix = "configpub"
)

// Run executes the demo. It stops every process it started before
// returning, whether it succeeds, fails or ctx is cancelled (Ctrl-C).
func Run(ctx context.Context, opts Options) (err error) {
	if opts.Dir == "" {
		opts.Dir = filepath.Join(".configpub", "demo")
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if opts.Policy == nil {
		if opts.Policy, err = fixtures.PolicyRepo(); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	if opts.EnvTag == "" {
		opts.EnvTag = "dev"
	}
	if opts.Binary == "" {
		if opts.Binary, err = os.Executable(); err != nil {
			return fmt.Errorf("demo: locate configpub: %w", err)
		}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d := &demo{opts: opts, dir: dir, out: opts.Out, env: opts.EnvTag}
	defer func() {
		if cerr := d.cleanup(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := d.run(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("demo interrupted: %w", ctx.Err())
		}
		return err
	}
	return nil
}

// demo is one run's state.
type demo struct {
	opts Options
	dir  string
	out  io.Writer
	env  string
	step int

	p       *procs
	pg      *pgcluster.Cluster
	proxy   *tamperProxy
	repo    *policyRepo
	ownerDB string // database owner URL (migrations)
	promDB  string // configpub_promoter member
	servDB  string // configpub_server member
	viewDB  string // configpub_viewer (+ configpub_viewer_bytes) member
	regAddr string
	srvURL  string
	conURL  string

	release1 *bundle.Manifest
	rts      []*runtime
}

func (d *demo) path(parts ...string) string {
	return filepath.Join(append([]string{d.dir}, parts...)...)
}

func (d *demo) title(s string) {
	d.step++
	fmt.Fprintf(d.out, "\n==> %d. %s\n", d.step, s)
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "    "+format+"\n", args...)
}

func (d *demo) run(ctx context.Context) error {
	fmt.Fprintf(d.out, "configpub demo — the whole pipeline on embedded defaults (state in %s)\n", rel(d.dir))
	if err := d.prepare(ctx); err != nil {
		return err
	}
	for _, s := range []func(context.Context) error{
		d.startDatabase,
		d.startRegistry,
		d.makeKeys,
		d.createPolicyRepo,
		d.compileAndPlan,
		d.publish,
		d.promote,
		d.startServer,
		d.startConsole,
		func(ctx context.Context) error {
			return d.runRuntimes(ctx, "Three runtimes fetch, verify and apply release 1", 1)
		},
		d.secondChange,
		d.publish,
		d.promote,
		func(ctx context.Context) error { return d.runRuntimes(ctx, "The runtimes reload release 2", 2) },
		d.rollback,
		func(ctx context.Context) error {
			return d.runRuntimes(ctx, "The runtimes follow the rollback to release 1", 1)
		},
		d.tamper,
		d.timeline,
	} {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(d.out, "\nDemo complete: release 1, release 2, rollback and a rejected tamper, all verified.\n")
	fmt.Fprintf(d.out, "Operator console: %s (timeline: %senv/%s)\n", d.conURL, d.conURL, d.env)
	d.whatNext()
	if d.opts.Keep {
		return d.keep(ctx)
	}
	return nil
}

// whatNext prints where a new user goes from here.
func (d *demo) whatNext() {
	fmt.Fprintf(d.out, "\nWhat next:\n")
	if !d.opts.Keep {
		fmt.Fprintf(d.out, "    configpub demo --keep      # the same, leaving the services running to explore\n")
	}
	fmt.Fprintf(d.out, "    configpub init my-policy   # a minimal policy repository of your own (docs/authoring.md)\n")
	fmt.Fprintf(d.out, "    configpub --help           # every verb, grouped, with examples\n")
	fmt.Fprintf(d.out, "    docs/operations.md         # production: database roles, migrations, the GitHub promote workflow, Kubernetes\n")
}

// keep waits for ctx to end with every service running.
func (d *demo) keep(ctx context.Context) error {
	fmt.Fprintf(d.out, "\nKept running until Ctrl-C:\n")
	fmt.Fprintf(d.out, "    PostgreSQL        %s\n", d.promDB)
	fmt.Fprintf(d.out, "    OCI registry      http://%s/v2/\n", d.regAddr)
	fmt.Fprintf(d.out, "    Config Server     %s\n", d.srvURL)
	fmt.Fprintf(d.out, "    Operator console  %s\n", d.conURL)
	fmt.Fprintf(d.out, "    Signing key       %s (COSIGN_PASSWORD=%s; trusted key %s)\n",
		d.path("keys", "cosign.key"), cosignPassword, d.path("keys", "cosign.pub"))
	fmt.Fprintf(d.out, "To run configpub against them in another shell:\n    export CONFIGPUB_DATABASE_URL='%s' COSIGN_PASSWORD=%s\n    configpub status --env %s\n",
		d.promDB, cosignPassword, d.opts.EnvTag)
	<-ctx.Done()
	return nil
}

// prepare stops whatever a previous run left behind and starts from an
// empty state directory.
func (d *demo) prepare(ctx context.Context) error {
	killStale(d.dir)
	if _, err := os.Stat(filepath.Join(d.pgDir(), "data", "PG_VERSION")); err == nil {
		if c, err := pgcluster.New(ctx, pgcluster.Options{Dir: d.pgDir()}); err == nil && c.Running(ctx) {
			_ = c.Stop(ctx)
		}
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("demo: clear %s: %w", d.dir, err)
	}
	if err := os.RemoveAll(d.pgDir()); err != nil {
		return fmt.Errorf("demo: clear %s: %w", d.pgDir(), err)
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	env := []string{"COSIGN_PASSWORD=" + cosignPassword}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "COSIGN_PASSWORD=") || strings.HasPrefix(kv, "CONFIGPUB_DATABASE_URL=") ||
			strings.HasPrefix(kv, "PGPASSFILE=") || strings.HasPrefix(kv, "PGPASSWORD=") {
			continue
		}
		env = append(env, kv)
	}
	d.p = &procs{bin: d.opts.Binary, env: env, out: d.out, dir: d.dir}
	return nil
}

// pgDir is where the cluster lives: inside the state directory when the
// postgres OS user can reach it, else under the system temp directory
// (running as root from a home directory that is closed to other users).
func (d *demo) pgDir() string {
	if os.Geteuid() != 0 || reachableByOthers(d.dir) {
		return d.path("postgres")
	}
	return filepath.Join(os.TempDir(), "configpub-demo-postgres")
}

func reachableByOthers(dir string) bool {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if p == filepath.Dir(p) {
			return true
		}
	}
}

func (d *demo) cleanup() error {
	var errs []error
	if d.proxy != nil {
		d.proxy.close()
	}
	if d.p != nil {
		d.p.stopAll()
	}
	if d.pg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := d.pg.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if d.step > 0 {
		fmt.Fprintf(d.out, "\nStopped every process the demo started.\n")
	}
	return errors.Join(errs...)
}

func (d *demo) startDatabase(ctx context.Context) error {
	d.title("Start a private PostgreSQL cluster and migrate the configpub schema")
	c, err := pgcluster.New(ctx, pgcluster.Options{Dir: d.pgDir()})
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	d.pg = c
	d.say("PostgreSQL on 127.0.0.1:%d (data in %s)", c.Port, rel(c.DataDir()))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("demo: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE configpub"); err != nil {
		return fmt.Errorf("demo: create database: %w", err)
	}
	d.ownerDB = c.URL("configpub")
	if _, err := d.p.run(ctx, "db", "migrate", "--database", d.ownerDB); err != nil {
		return err
	}
	// Login users for the least-privilege roles the migration created,
	// each with a random password. The passwords go into a 0600 passfile
	// that every configpub the demo starts finds through PGPASSFILE: they
	// never appear on a command line (visible to every local user in ps).
	var pass strings.Builder
	for _, u := range []struct{ user, role string }{
		{"demo_promoter", "configpub_promoter"},
		{"demo_server", "configpub_server"},
		{"demo_viewer", "configpub_viewer, configpub_viewer_bytes"},
	} {
		pw, err := randomPassword()
		if err != nil {
			return fmt.Errorf("demo: create login %s: %w", u.user, err)
		}
		sql := fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s' IN ROLE %s", u.user, pw, u.role)
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("demo: create login %s: %w", u.user, err)
		}
		fmt.Fprintf(&pass, "127.0.0.1:%d:configpub:%s:%s\n", c.Port, u.user, pw)
	}
	passfile := d.path("pgpass")
	if err := atomicfile.Write(passfile, []byte(pass.String()), 0o600); err != nil {
		return fmt.Errorf("demo: passfile: %w", err)
	}
	d.p.env = append(d.p.env, "PGPASSFILE="+passfile)
	d.promDB = fmt.Sprintf("postgres://demo_promoter@127.0.0.1:%d/configpub?sslmode=disable", c.Port)
	d.servDB = fmt.Sprintf("postgres://demo_server@127.0.0.1:%d/configpub?sslmode=disable", c.Port)
	d.viewDB = fmt.Sprintf("postgres://demo_viewer@127.0.0.1:%d/configpub?sslmode=disable", c.Port)
	d.say("promoter connects as demo_promoter (member of configpub_promoter)")
	d.say("Config Server connects as demo_server (member of configpub_server: read-only, evidence inserts)")
	return nil
}

func (d *demo) startRegistry(ctx context.Context) error {
	d.title("Start the embedded OCI registry (CNCF Distribution, filesystem storage)")
	port, err := freePort()
	if err != nil {
		return err
	}
	d.regAddr = fmt.Sprintf("127.0.0.1:%d", port)
	return d.p.start(ctx, "registry", "http://"+d.regAddr+"/v2/",
		"registry", "serve", "--dir", d.path("registry"), "--listen", d.regAddr)
}

func (d *demo) makeKeys(ctx context.Context) error {
	d.title("Generate a cosign key pair (artifact and delivery-manifest signing) and a workload-token key")
	if _, err := d.p.run(ctx, "keygen", "--out", d.path("keys")); err != nil {
		return err
	}
	_, err := d.p.run(ctx, "token", "keygen", "--out", d.path("jwt"))
	return err
}

func (d *demo) createPolicyRepo(ctx context.Context) error {
	d.title("Create the policy repository: protected main, policy merged by a reviewed pull request")
	now := time.Now().UTC().Truncate(time.Second)
	r, err := newPolicyRepo(d.path("policy"), now.Add(-2*time.Minute))
	if err != nil {
		return err
	}
	d.repo = r
	if err := r.branch("policy/initial"); err != nil {
		return err
	}
	if err := r.copyTree(d.opts.Policy); err != nil {
		return fmt.Errorf("demo: copy policy: %w", err)
	}
	if _, err := r.commit("Add dev and prod policy with their release manifests", now.Add(-time.Minute)); err != nil {
		return err
	}
	if _, err := r.merge("policy/initial", 1, "Add dev and prod policy", now); err != nil {
		return err
	}
	lines, err := r.log(5)
	if err != nil {
		return err
	}
	d.say("main (first-parent history):")
	for _, l := range lines {
		d.say("  %s", l)
	}
	return nil
}

func (d *demo) compileAndPlan(ctx context.Context) error {
	d.title("Compile: the committed release manifest is exactly what the sources compile to")
	if _, err := d.p.run(ctx, "compile", "--repo", d.path("policy"), "--env", d.env, "--check"); err != nil {
		return err
	}
	if _, err := d.p.run(ctx, "compile", "--repo", d.path("policy"), "--env", d.env, "--out", d.path("out")); err != nil {
		return err
	}
	m, err := d.manifest()
	if err != nil {
		return err
	}
	d.release1 = m
	d.say("release %d of %s: %d targets, releaseDigest %s", m.ReleaseVersion, d.env, len(m.Targets), m.ReleaseDigest)
	for _, t := range m.Targets {
		d.say("  %-9s %-42s artifact %s", t.Audience, t.ServiceID, short(t.ArtifactDigest))
	}
	return nil
}

func (d *demo) publish(ctx context.Context) error {
	d.title("Publish every values.yml as a signed, content-addressed OCI artifact")
	_, err := d.p.run(ctx, "publish", "--repo", d.path("policy"), "--env", d.env,
		"--registry", d.regAddr+"/"+registryPrefix, "--key", d.path("keys", "cosign.key"), "--plain-http")
	return err
}

func (d *demo) promote(ctx context.Context) error {
	m, err := d.manifest()
	if err != nil {
		return err
	}
	d.title(fmt.Sprintf("Promote release %d from the reviewed commit on main", m.ReleaseVersion))
	_, err = d.p.run(ctx, "promote", "--repo", d.path("policy"), "--env", d.env, "--ref", "refs/heads/main",
		"--database", d.promDB, "--registry", d.regAddr+"/"+registryPrefix,
		"--key", d.path("keys", "cosign.key"), "--plain-http", "--require-trailer", "Reviewed-by")
	return err
}

func (d *demo) startServer(ctx context.Context) error {
	d.title("Start the Config Server (read-only role, no signing key)")
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	d.srvURL = "http://" + addr
	return d.p.start(ctx, "config-server", d.srvURL+"/readyz",
		"serve", "--database", d.servDB, "--listen", addr, "--jwks", d.path("jwt", "jwks.json"),
		"--issuer", issuer, "--audience", tokenAudience)
}

func (d *demo) startConsole(ctx context.Context) error {
	d.title("Start the operator console (read-only role, values diff on, loopback only)")
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	d.conURL = "http://" + addr + "/"
	return d.p.start(ctx, "console", d.conURL+"healthz",
		"console", "--database", d.viewDB, "--listen", addr, "--show-values")
}

func (d *demo) rollback(ctx context.Context) error {
	d.title("Roll back to release 1: a pointer move to the existing snapshots, nothing edited")
	_, err := d.p.run(ctx, "rollback", "--database", d.promDB, "--env", d.env, "--release", "1",
		"--reason", "demo: roll back the account limits change", "--actor", "riley@example.com",
		"--key", d.path("keys", "cosign.key"))
	return err
}

func (d *demo) timeline(ctx context.Context) error {
	d.title("The publication timeline")
	status, err := d.p.run(ctx, "status", "--database", d.promDB, "--env", d.env)
	if err != nil {
		return err
	}
	pinnable, drafts, err := checkWorkflowViews(status, d.release1)
	if err != nil {
		return err
	}
	d.say("workflow views of release %d: %d PUBLISHED versions PINNABLE, %d DRAFT not recorded", d.release1.ReleaseVersion, pinnable, drafts)
	_, err = d.p.run(ctx, "history", "--database", d.promDB, "--env", d.env)
	return err
}

// manifest reads the release manifest on the policy repository's working tree.
func (d *demo) manifest() (*bundle.Manifest, error) {
	p := d.path("policy")
	b, err := compiler.CommittedRelease(os.DirFS(p), d.env)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return bundle.ParseManifest(compiler.ManifestPath(d.env), b)
}

func short(dgst string) string {
	if len(dgst) > 7+16 {
		return dgst[:7+16] + "…"
	}
	return dgst
}

// randomPassword returns 32 random hex digits (safe inside an SQL literal).
func randomPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
