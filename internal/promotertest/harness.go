package promotertest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// Env is the environment every release of Repo is compiled for.
const Env = "dev"

// Repo is a policy repository (fixtures/policy-repo) with two
// reviewed releases of Env, each landed on main by a merge commit
// carrying a Reviewed-by trailer: release 1 (the fixture as is) and
// release 2 (agent logging DEBUG -> INFO, so only agent targets change).
type Repo struct {
	Git       *gittest.Repo
	R1, R2    plumbing.Hash                       // the merge commits of releases 1 and 2
	Feature2  plumbing.Hash                       // release 2 on its branch: the merge's second parent
	Snapshots map[plumbing.Hash]map[string]string // commit -> SnapshotsOf its release
}

// CompiledFiles compiles files for Env and returns them with
// releases/<env>.yaml rewritten, as `configpub compile` would.
func CompiledFiles(t testing.TB, files map[string][]byte, createdAt time.Time) (map[string][]byte, *compiler.Result) {
	t.Helper()
	return CompiledFilesWith(t, files, compiler.Options{CreatedAt: createdAt})
}

// CompiledFilesWith is CompiledFiles with the compiler's options o (its
// EnvTag is Env), for example o.Renew as `configpub compile --renew`.
func CompiledFilesWith(t testing.TB, files map[string][]byte, o compiler.Options) (map[string][]byte, *compiler.Result) {
	t.Helper()
	dir := t.TempDir()
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o.EnvTag = Env
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), o)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	out := make(map[string][]byte, len(files)+1)
	for p, b := range files {
		out[p] = b
	}
	SetRelease(t, out, res.ManifestBytes)
	return out, res
}

// SetRelease replaces the release manifest files in files (the root and
// every shard of the archive's environment) with the archive's.
func SetRelease(t testing.TB, files map[string][]byte, archive []byte) {
	t.Helper()
	rf, err := bundle.SplitArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	for p := range files {
		if p == compiler.ManifestPath(Env) || strings.HasPrefix(p, bundle.ShardDir(Env)+"/") {
			delete(files, p)
		}
	}
	for _, f := range rf {
		files[f.Path] = f.Bytes
	}
}

// CommittedRelease returns the release committed in files as a release archive.
func CommittedRelease(t testing.TB, files map[string][]byte) []byte {
	t.Helper()
	b, err := compiler.CommittedRelease(MapFS(files), Env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// NewRepo builds the repository in a temporary directory.
func NewRepo(t testing.TB) *Repo {
	t.Helper()
	p := &Repo{Git: gittest.New(t), Snapshots: map[plumbing.Hash]map[string]string{}}
	r := p.Git
	base := r.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("policy\n")}, Message: "initial"})
	v1, res1 := CompiledFiles(t, gittest.ReadDir(t, filepath.Join(moduleRoot(t), "fixtures", "policy-repo")), gittest.Epoch)
	r.Commit(gittest.Commit{Branch: "release-1", From: base, Files: v1, Message: "release 1"})
	p.R1 = r.Merge(gittest.Main, "release-1", gittest.Commit{Message: "Merge pull request #1: release 1", Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	p.Snapshots[p.R1] = SnapshotsOf(res1)

	files := r.Files(p.R1)
	envFile := "environments/" + Env + ".yaml"
	changed := bytes.Replace(files[envFile], []byte("level: DEBUG"), []byte("level: INFO"), 1)
	if bytes.Equal(changed, files[envFile]) {
		t.Fatalf("fixture %s has no 'level: DEBUG' to change", envFile)
	}
	files[envFile] = changed
	v2, res2 := CompiledFiles(t, files, gittest.Epoch.Add(time.Hour))
	if res2.Manifest.ReleaseVersion != 2 || res2.Manifest.BaseReleaseVersion != 1 {
		t.Fatalf("got release %d on base %d, want 2 on 1", res2.Manifest.ReleaseVersion, res2.Manifest.BaseReleaseVersion)
	}
	p.Feature2 = r.Commit(gittest.Commit{Branch: "release-2", From: p.R1, Files: v2, Message: "release 2: agent logging INFO"})
	p.R2 = r.Merge(gittest.Main, "release-2", gittest.Commit{Message: "Merge pull request #2: agent logging INFO", Trailers: []string{"Reviewed-by: Dave <dave@example.com>", "Approved-by: Erin <erin@example.com>"}})
	p.Snapshots[p.R2] = SnapshotsOf(res2)
	return p
}

// SnapshotsOf maps "host/serviceId" to the snapshot a release points it at.
func SnapshotsOf(res *compiler.Result) map[string]string {
	m := map[string]string{}
	for _, t := range res.Targets {
		m[t.Host+"/"+t.ServiceID] = t.SnapshotID
	}
	return m
}

// Harness is a real database, a real registry and a cosign key.
type Harness struct {
	Repo     *Repo
	DB       *pgtest.DB
	Pool     *pgxpool.Pool
	Store    *promoter.Store
	Registry *registrytest.Registry
	Client   *registry.Client
	Signer   *cosignkey.Signer
	KeyPath  string // the encrypted cosign key file
	Password string // its password
	Prefix   string // registry prefix "host/configpub"
}

// New builds a Repo, a fresh migrated database with a Store on it, a
// registry and a password-protected cosign key.
func New(t testing.TB) *Harness {
	t.Helper()
	h := &Harness{Repo: NewRepo(t), DB: pgtest.New(t), Registry: registrytest.New(t, registrytest.Options{}), Password: "test-password"}
	h.Pool = h.DB.Pool(t)
	kp, err := cosignkey.GenerateKeyPair([]byte(h.Password))
	if err != nil {
		t.Fatal(err)
	}
	if h.KeyPath, _, err = cosignkey.WriteKeyPair(t.TempDir(), kp); err != nil {
		t.Fatal(err)
	}
	if h.Signer, err = cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte(h.Password)); err != nil {
		t.Fatal(err)
	}
	if h.Store, err = promoter.Open(context.Background(), h.Pool, promoter.Options{Signer: h.Signer}); err != nil {
		t.Fatal(err)
	}
	if h.Client, err = registry.New(registry.Options{PlainHTTP: true, Credentials: nil, MaxRetries: -1}); err != nil {
		t.Fatal(err)
	}
	h.Prefix = h.Registry.Host + "/configpub"
	return h
}

// Options returns the promotion options for commit (zero: the protected
// ref's tip) against the harness's store, registry and key.
func (h *Harness) Options(commit plumbing.Hash) promote.Options {
	o := promote.Options{
		EnvTag: Env, Store: h.Store, Registry: h.Client, RegistryPrefix: h.Prefix, Signer: h.Signer,
	}
	if !commit.IsZero() {
		o.Review.Commit = commit.String()
	}
	return o
}

// Promote runs the pipeline on the harness's repository with o.
func (h *Harness) Promote(t testing.TB, o promote.Options) (*promote.Result, error) {
	t.Helper()
	repo, err := review.Open(h.Repo.Git.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return promote.Run(ctx, repo, o)
}

// State is what the store holds for Env.
type State struct {
	Pointers map[string]string // host/serviceId -> snapshot id
	Current  int64             // environment.current_release_version (0 = none)
	Counts   map[string]int64  // rows per table
	// Journal maps a release version to its journal sequences (ordered)
	// and Revision to its config_release.row_revision.
	Journal  map[int64][]int64
	Revision map[int64]int64
}

// Tables are the store's tables a promotion writes, counted by ReadState.
var Tables = []string{"artifact", "config_snapshot", "config_release", "config_release_journal",
	"config_release_target", "command", "current_pointer", "pointer_move", "delivery_manifest"}

// ReadState reads State from one snapshot of the database.
func ReadState(t testing.TB, pool *pgxpool.Pool) State {
	t.Helper()
	ctx := context.Background()
	s := State{Pointers: map[string]string{}, Counts: map[string]int64{}, Journal: map[int64][]int64{}, Revision: map[int64]int64{}}
	tx, err := pool.Begin(ctx) // one snapshot of the database
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range Tables {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM configpub."+tbl).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", tbl, err)
		}
		s.Counts[tbl] = n
	}
	rows, err := tx.Query(ctx, "SELECT host || '/' || service_id, snapshot_id::text FROM configpub.current_pointer WHERE env_tag = $1", Env)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		s.Pointers[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var cur *int64
	err = tx.QueryRow(ctx, "SELECT current_release_version FROM configpub.environment WHERE env_tag = $1", Env).Scan(&cur)
	if err == nil && cur != nil {
		s.Current = *cur
	}
	rows, err = tx.Query(ctx, "SELECT release_version, sequence FROM configpub.config_release_journal WHERE env_tag = $1 ORDER BY release_version, sequence", Env)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v, seq int64
		if err := rows.Scan(&v, &seq); err != nil {
			t.Fatal(err)
		}
		s.Journal[v] = append(s.Journal[v], seq)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows, err = tx.Query(ctx, "SELECT release_version, row_revision FROM configpub.config_release WHERE env_tag = $1", Env)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v, rev int64
		if err := rows.Scan(&v, &rev); err != nil {
			t.Fatal(err)
		}
		s.Revision[v] = rev
	}
	return s
}

// CheckJournal fails unless every release's journal sequences are exactly
// 1..row_revision.
func CheckJournal(t testing.TB, s State) {
	t.Helper()
	versions := make([]int64, 0, len(s.Revision))
	for v := range s.Revision {
		versions = append(versions, v)
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
	for _, v := range versions {
		seqs := s.Journal[v]
		if int64(len(seqs)) != s.Revision[v] {
			t.Errorf("release %d: got journal %v, want sequences 1..%d", v, seqs, s.Revision[v])
			continue
		}
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Errorf("release %d: got journal %v, want contiguous 1..%d", v, seqs, s.Revision[v])
				break
			}
		}
	}
}

// PointersAt reports whether the pointers are exactly those of want.
func PointersAt(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// SameCounts reports whether a and b count the same rows in every table of
// Tables.
func SameCounts(a, b map[string]int64) bool {
	for _, tbl := range Tables {
		if a[tbl] != b[tbl] {
			return false
		}
	}
	return true
}

// Replace replaces the first occurrence of old by new in files[path],
// failing t when there is none.
func Replace(t testing.TB, files map[string][]byte, path, old, new string) {
	t.Helper()
	b := bytes.Replace(files[path], []byte(old), []byte(new), 1)
	if bytes.Equal(b, files[path]) {
		t.Fatalf("%s has no %q", path, old)
	}
	files[path] = b
}

// AddRelease3 lands release 3 on main, built on release 2 (the committed
// manifest), replacing the first occurrence of old by new in the
// environment file.
func AddRelease3(t testing.TB, p *Repo, old, new string) plumbing.Hash {
	t.Helper()
	files := p.Git.Files(p.R2)
	Replace(t, files, "environments/"+Env+".yaml", old, new)
	v3, res3 := CompiledFiles(t, files, gittest.Epoch.Add(2*time.Hour))
	if res3.Manifest.ReleaseVersion != 3 || res3.Manifest.BaseReleaseVersion != 2 {
		t.Fatalf("got release %d on base %d, want 3 on 2", res3.Manifest.ReleaseVersion, res3.Manifest.BaseReleaseVersion)
	}
	p.Git.Commit(gittest.Commit{Branch: "release-3", From: p.R2, Files: v3, Message: "release 3: " + new})
	r3 := p.Git.Merge(gittest.Main, "release-3", gittest.Commit{Message: "Merge pull request #3: " + new,
		Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	p.Snapshots[r3] = SnapshotsOf(res3)
	return r3
}

// MapFS is an in-memory policy tree.
func MapFS(files map[string][]byte) fstest.MapFS {
	m := fstest.MapFS{}
	for p, b := range files {
		m[p] = &fstest.MapFile{Data: b, Mode: 0o644}
	}
	return m
}
