package replica_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/knowledge/replica"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var (
	identity = bundle.Identity{Host: "kb.example", ServiceID: "knowledge-1", EnvTag: "prod"}
	t0       = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
)

func uuidN(n int64) string { return fmt.Sprintf("%08x-0000-8000-8000-%012x", n, n) }

// gen describes release k of a synthetic Knowledge host with n knowledge
// bases. From release to release a seventh of the knowledge bases (with
// their profiles, generations and bindings) disappear and the previous
// seventh comes back, a fifth change their limits, and index generations
// roll forward, so every release inserts, updates, keeps and tombstones.
type gen struct{ n int }

func (g gen) kbPresent(k int64, i int) bool { return int64(i%7) != k%7 }

// namespace returns release k's knowledgePolicy without its inventory.
func (g gen) namespace(k int64) map[string]any {
	var kbs, bindings []any
	for i := 0; i < g.n; i++ {
		if !g.kbPresent(k, i) {
			continue
		}
		name := fmt.Sprintf("kb-%04d", i)
		qpm := int64(100 + i)
		if int64(i%5) == k%5 {
			qpm += k
		}
		kbs = append(kbs, map[string]any{
			"name": name, "owner": "team-" + fmt.Sprint(i%13), "tenant": "acme",
			"index":            map[string]any{"engine": "pgvector", "shards": int64(1 + i%4), "embeddingModel": "embed-3"},
			"indexGenerations": []any{int64(1 + (k+int64(i))/3), int64(2 + (k+int64(i))/3)},
			"retrievalProfiles": []any{
				map[string]any{"name": "default", "topK": int64(8), "maxResultTokens": int64(2000), "graphBehavior": "none", "digest": jcs.BytesDigest([]byte(name + "/default"))},
				map[string]any{"name": "deep", "topK": int64(20), "maxResultTokens": int64(6000), "graphBehavior": "neighbors", "digest": jcs.BytesDigest([]byte(name + "/deep"))},
			},
			"limits": map[string]any{"queriesPerMinute": qpm, "maxIngestBytesPerDay": int64(1 << 30)},
		})
		bindings = append(bindings, map[string]any{
			"agent": fmt.Sprintf("agent-%d", i%17), "policyDigest": jcs.BytesDigest([]byte(fmt.Sprint("agent", i%17))),
			"knowledgeBase": name, "retrievalProfile": []string{"default", "deep"}[i%2],
			"retrievalContractDigest": jcs.BytesDigest([]byte(name)),
		})
	}
	return map[string]any{"host": identity.Host, "tenant": "acme", "knowledgeBases": kbs, "bindings": bindings, "acceptedPublications": []any{}}
}

// snapshot returns release k (manifest sequence seq) with its complete
// inventory and the tombstones relative to release k-1.
func (g gen) snapshot(t testing.TB, k, seq int64) *client.Snapshot {
	t.Helper()
	cur := inventoryOf(t, g.namespace(k))
	var tombs []any
	if k > 1 {
		now := map[string]bool{}
		for _, it := range cur {
			m := it.(map[string]any)
			now[m["kind"].(string)+"\x00"+m["id"].(string)] = true
		}
		for _, it := range inventoryOf(t, g.namespace(k-1)) {
			m := it.(map[string]any)
			if !now[m["kind"].(string)+"\x00"+m["id"].(string)] {
				tombs = append(tombs, it)
			}
		}
	}
	return snapshotOf(t, k, g.namespace(k), withInventory(t, cur, tombs), seq)
}

// inventoryOf computes the inventory items of ns independently of the
// package: the replica rules of the compiler, spelled out.
func inventoryOf(t testing.TB, ns map[string]any) []any {
	t.Helper()
	var out []any
	add := func(kind, id string, v any) {
		d, err := canonicalDigest(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]any{"kind": kind, "id": id, "digest": d})
	}
	for _, raw := range ns["knowledgeBases"].([]any) {
		kb := raw.(map[string]any)
		name := kb["name"].(string)
		add("knowledgeBase", name, kb)
		for _, p := range kb["retrievalProfiles"].([]any) {
			add("retrievalProfile", name+"/"+p.(map[string]any)["name"].(string), p)
		}
		for _, g := range kb["indexGenerations"].([]any) {
			add("indexGeneration", fmt.Sprintf("%s/%d", name, g), g)
		}
	}
	for _, raw := range ns["bindings"].([]any) {
		b := raw.(map[string]any)
		add("binding", b["agent"].(string)+"/"+b["knowledgeBase"].(string)+"/"+b["retrievalProfile"].(string), b)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].(map[string]any), out[j].(map[string]any)
		if a["kind"] != b["kind"] {
			return a["kind"].(string) < b["kind"].(string)
		}
		return a["id"].(string) < b["id"].(string)
	})
	return out
}

// withInventory returns the inventory value of items and tombstones with
// its digest.
func withInventory(t testing.TB, items, tombs []any) map[string]any {
	t.Helper()
	if items == nil {
		items = []any{}
	}
	if tombs == nil {
		tombs = []any{}
	}
	d, err := canonicalDigest(map[string]any{"items": items, "tombstones": tombs})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]any{"items": items, "tombstones": tombs, "digest": d}
}

// snapshotOf assembles a Knowledge snapshot of release k around ns (inv
// added as its inventory when not nil) with a delivery manifest at
// sequence seq, its contentDigest computed over the final namespace.
func snapshotOf(t testing.TB, k int64, ns, inv map[string]any, seq int64) *client.Snapshot {
	t.Helper()
	if inv != nil {
		ns["inventory"] = inv
	}
	cd, err := canonicalDigest(ns)
	if err != nil {
		t.Fatal(err)
	}
	env := bundle.RuntimePolicy{
		PublicationID: uuidN(1000 + k), ReleaseVersion: k, PolicySnapshotID: uuidN(2000 + k), PolicyVersion: k,
		PolicyDigest: jcs.BytesDigest([]byte(fmt.Sprint("policy", k))), ContentDigest: cd, Audience: bundle.AudienceKnowledge,
		Host: identity.Host, ServiceID: identity.ServiceID, EnvTag: identity.EnvTag, SourceEventSequence: 100 + k,
		SchemaVersion: bundle.SchemaVersion, RevocationEpoch: 2, CompatibilityGeneration: 1,
	}
	art := jcs.BytesDigest([]byte(fmt.Sprint("values", k)))
	m := &bundle.DeliveryManifest{
		Type: bundle.DeliveryManifestType, Host: identity.Host, ServiceID: identity.ServiceID, EnvTag: identity.EnvTag,
		Audience: bundle.AudienceKnowledge, SnapshotID: uuidN(3000 + k), PublicationID: env.PublicationID,
		PolicySnapshotID: env.PolicySnapshotID, ReleaseVersion: k, ArtifactDigest: art, ContentDigest: cd,
		PolicyDigest: env.PolicyDigest, SchemaVersion: env.SchemaVersion, CompatibilityGeneration: 1, RevocationEpoch: 2,
		Sequence: seq, IssuedAt: t0.Add(time.Duration(seq) * time.Minute).Format(time.RFC3339),
		ExpiresAt: t0.Add(time.Duration(seq)*time.Minute + 25*time.Hour).Format(time.RFC3339),
	}
	return &client.Snapshot{Envelope: env, Namespace: ns, Manifest: m, SnapshotID: m.SnapshotID, PublicationID: env.PublicationID,
		PolicyDigest: env.PolicyDigest, ContentDigest: cd, ArtifactDigest: art}
}

// newDB returns a migrated database and a pool of a loader login.
func newDB(t *testing.T) (*pgtest.DB, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := replica.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	return db, db.PoolURL(t, db.URLFor(t, replica.LoaderRole))
}

// tableState is everything the replica tables hold for the identity,
// xmin included, so that "unchanged" means not even rewritten.
type tableState struct {
	Pointer string
	Rows    []string // kind id digest xmin
}

func readTables(t testing.TB, q *pgxpool.Pool) tableState {
	t.Helper()
	ctx := context.Background()
	var s tableState
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT xmin::text || ' ' || snapshot_id::text || ' ' || release_version || ' ' || manifest_sequence
		|| ' ' || item_count FROM configpub_knowledge.applied_snapshot WHERE host = $1 AND service_id = $2 AND env_tag = $3), '')`,
		identity.Host, identity.ServiceID, identity.EnvTag).Scan(&s.Pointer)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := q.Query(ctx, `SELECT kind || ' ' || item_id || ' ' || digest || ' ' || xmin::text FROM configpub_knowledge.replica
		WHERE host = $1 AND service_id = $2 AND env_tag = $3 ORDER BY kind COLLATE "C", item_id COLLATE "C"`, identity.Host, identity.ServiceID, identity.EnvTag)
	if err != nil {
		t.Fatal(err)
	}
	if s.Rows, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	return s
}

// set lists "kind id digest" of the replica set stored, without xmin.
func (s tableState) set() []string {
	out := make([]string, len(s.Rows))
	for i, r := range s.Rows {
		out[i] = r[:strings.LastIndexByte(r, ' ')]
	}
	sort.Strings(out)
	return out
}

// expectedSet lists "kind id digest" of release k's inventory.
func expectedSet(t testing.TB, g gen, k int64) []string {
	var out []string
	for _, it := range inventoryOf(t, g.namespace(k)) {
		m := it.(map[string]any)
		out = append(out, m["kind"].(string)+" "+m["id"].(string)+" "+m["digest"].(string))
	}
	sort.Strings(out)
	return out
}

// canonicalDigest is "sha256:" over the RFC 8785 bytes of v.
func canonicalDigest(v any) (string, error) {
	b, err := replica.Canonical(v)
	if err != nil {
		return "", err
	}
	return jcs.BytesDigest(b), nil
}
