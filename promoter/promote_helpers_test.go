package promoter_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/promoter/review"
	"github.com/configpub/configpub/registry"
)

const promoteEnv = "dev"

// promoteRepo is a policy repository (fixtures/policy-repo) with two
// reviewed releases of promoteEnv, each landed on main by a merge commit
// carrying a Reviewed-by trailer: release 1 (the fixture as is) and
// release 2 (agent logging DEBUG -> INFO, so only agent targets change).
type promoteRepo struct {
	repo      *gittest.Repo
	r1, r2    plumbing.Hash
	feature2  plumbing.Hash // release 2 on its branch: the merge's second parent
	snapshots map[plumbing.Hash]map[string]string
}

// compiledFiles compiles files for promoteEnv and returns them with
// releases/<env>.yaml rewritten, as `configpub compile` would.
func compiledFiles(t testing.TB, files map[string][]byte, createdAt time.Time) (map[string][]byte, *compiler.Result) {
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
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: promoteEnv, CreatedAt: createdAt})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	out := make(map[string][]byte, len(files)+1)
	for p, b := range files {
		out[p] = b
	}
	setRelease(t, out, res.ManifestBytes)
	return out, res
}

// setRelease replaces the release manifest files in files (the root and
// every shard of the archive's environment) with the archive's.
func setRelease(t testing.TB, files map[string][]byte, archive []byte) {
	t.Helper()
	rf, err := bundle.SplitArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	for p := range files {
		if p == compiler.ManifestPath(promoteEnv) || strings.HasPrefix(p, bundle.ShardDir(promoteEnv)+"/") {
			delete(files, p)
		}
	}
	for _, f := range rf {
		files[f.Path] = f.Bytes
	}
}

// committedRelease returns the release committed in files as a release archive.
func committedRelease(t testing.TB, files map[string][]byte) []byte {
	t.Helper()
	b, err := compiler.CommittedRelease(mapFS(files), promoteEnv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newPromoteRepo(t testing.TB) *promoteRepo {
	t.Helper()
	p := &promoteRepo{repo: gittest.New(t), snapshots: map[plumbing.Hash]map[string]string{}}
	r := p.repo
	base := r.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("policy\n")}, Message: "initial"})
	v1, res1 := compiledFiles(t, gittest.ReadDir(t, filepath.Join("..", "fixtures", "policy-repo")), gittest.Epoch)
	r.Commit(gittest.Commit{Branch: "release-1", From: base, Files: v1, Message: "release 1"})
	p.r1 = r.Merge(gittest.Main, "release-1", gittest.Commit{Message: "Merge pull request #1: release 1", Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	p.snapshots[p.r1] = snapshotsOf(res1)

	files := r.Files(p.r1)
	envFile := "environments/" + promoteEnv + ".yaml"
	changed := bytes.Replace(files[envFile], []byte("level: DEBUG"), []byte("level: INFO"), 1)
	if bytes.Equal(changed, files[envFile]) {
		t.Fatalf("fixture %s has no 'level: DEBUG' to change", envFile)
	}
	files[envFile] = changed
	v2, res2 := compiledFiles(t, files, gittest.Epoch.Add(time.Hour))
	if res2.Manifest.ReleaseVersion != 2 || res2.Manifest.BaseReleaseVersion != 1 {
		t.Fatalf("got release %d on base %d, want 2 on 1", res2.Manifest.ReleaseVersion, res2.Manifest.BaseReleaseVersion)
	}
	p.feature2 = r.Commit(gittest.Commit{Branch: "release-2", From: p.r1, Files: v2, Message: "release 2: agent logging INFO"})
	p.r2 = r.Merge(gittest.Main, "release-2", gittest.Commit{Message: "Merge pull request #2: agent logging INFO", Trailers: []string{"Reviewed-by: Dave <dave@example.com>", "Approved-by: Erin <erin@example.com>"}})
	p.snapshots[p.r2] = snapshotsOf(res2)
	return p
}

// snapshotsOf maps "host/serviceId" to the snapshot a release points it at.
func snapshotsOf(res *compiler.Result) map[string]string {
	m := map[string]string{}
	for _, t := range res.Targets {
		m[t.Host+"/"+t.ServiceID] = t.SnapshotID
	}
	return m
}

// promoteHarness is a real database, a real registry and a cosign key.
type promoteHarness struct {
	p        *promoteRepo
	db       *pgtest.DB
	pool     *pgxpool.Pool
	store    *promoter.Store
	reg      *registrytest.Registry
	client   *registry.Client
	signer   *cosignkey.Signer
	keyPath  string
	password string
	prefix   string
}

func newPromoteHarness(t testing.TB) *promoteHarness {
	t.Helper()
	h := &promoteHarness{p: newPromoteRepo(t), db: pgtest.New(t), reg: registrytest.New(t, registrytest.Options{}), password: "test-password"}
	h.pool = h.db.Pool(t)
	kp, err := cosignkey.GenerateKeyPair([]byte(h.password))
	if err != nil {
		t.Fatal(err)
	}
	if h.keyPath, _, err = cosignkey.WriteKeyPair(t.TempDir(), kp); err != nil {
		t.Fatal(err)
	}
	if h.signer, err = cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte(h.password)); err != nil {
		t.Fatal(err)
	}
	if h.store, err = promoter.Open(context.Background(), h.pool, promoter.Options{Signer: h.signer}); err != nil {
		t.Fatal(err)
	}
	if h.client, err = registry.New(registry.Options{PlainHTTP: true, Credentials: nil, MaxRetries: -1}); err != nil {
		t.Fatal(err)
	}
	h.prefix = h.reg.Host + "/configpub"
	return h
}

func (h *promoteHarness) opts(commit plumbing.Hash) promoter.PromoteOptions {
	o := promoter.PromoteOptions{
		EnvTag: promoteEnv, Store: h.store, Registry: h.client, RegistryPrefix: h.prefix, Signer: h.signer,
	}
	if !commit.IsZero() {
		o.Review.Commit = commit.String()
	}
	return o
}

func (h *promoteHarness) promote(t testing.TB, o promoter.PromoteOptions) (*promoter.PromoteResult, error) {
	t.Helper()
	repo, err := review.Open(h.p.repo.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return promoter.Promote(ctx, repo, o)
}

// dbState is what the store holds for promoteEnv.
type dbState struct {
	Pointers map[string]string // host/serviceId -> snapshot id
	Current  int64             // environment.current_release_version (0 = none)
	Counts   map[string]int64  // rows per table
	// Journal maps a release version to its journal sequences (ordered)
	// and Revision to its config_release.row_revision.
	Journal  map[int64][]int64
	Revision map[int64]int64
}

var promoteTables = []string{"artifact", "config_snapshot", "config_release", "config_release_journal",
	"config_release_target", "command", "current_pointer", "pointer_move", "delivery_manifest"}

func readState(t testing.TB, pool *pgxpool.Pool) dbState {
	t.Helper()
	ctx := context.Background()
	s := dbState{Pointers: map[string]string{}, Counts: map[string]int64{}, Journal: map[int64][]int64{}, Revision: map[int64]int64{}}
	tx, err := pool.Begin(ctx) // one snapshot of the database
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range promoteTables {
		var n int64
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM configpub."+tbl).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", tbl, err)
		}
		s.Counts[tbl] = n
	}
	rows, err := tx.Query(ctx, "SELECT host || '/' || service_id, snapshot_id::text FROM configpub.current_pointer WHERE env_tag = $1", promoteEnv)
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
	err = tx.QueryRow(ctx, "SELECT current_release_version FROM configpub.environment WHERE env_tag = $1", promoteEnv).Scan(&cur)
	if err == nil && cur != nil {
		s.Current = *cur
	}
	rows, err = tx.Query(ctx, "SELECT release_version, sequence FROM configpub.config_release_journal WHERE env_tag = $1 ORDER BY release_version, sequence", promoteEnv)
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
	rows, err = tx.Query(ctx, "SELECT release_version, row_revision FROM configpub.config_release WHERE env_tag = $1", promoteEnv)
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

// checkJournal fails unless every release's journal sequences are exactly
// 1..row_revision.
func checkJournal(t testing.TB, s dbState) {
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

// pointersAt reports whether the pointers are exactly those of want.
func pointersAt(got, want map[string]string) bool {
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

func sameCounts(a, b map[string]int64) bool {
	for _, tbl := range promoteTables {
		if a[tbl] != b[tbl] {
			return false
		}
	}
	return true
}
