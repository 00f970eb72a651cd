package replica_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/knowledge/replica"
)

// TestStageGoldenSnapshot stages the compiler's golden Knowledge values.yml:
// the replicas derived from its namespace must digest to exactly the
// inventory the compiler wrote.
func TestStageGoldenSnapshot(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "golden", "prod", "dev.lightapi.net", "com.networknt.knowledge-1.0.0", "values.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		RuntimePolicy   bundle.RuntimePolicy `yaml:"runtimePolicy"`
		KnowledgePolicy map[string]any       `yaml:"knowledgePolicy"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	ns := jsonCompatible(doc.KnowledgePolicy).(map[string]any)
	snap := snapshotOf(t, doc.RuntimePolicy.ReleaseVersion, ns, nil, 1)
	if snap.ContentDigest != doc.RuntimePolicy.ContentDigest {
		t.Fatalf("namespace digests to %s, golden contentDigest %s", snap.ContentDigest, doc.RuntimePolicy.ContentDigest)
	}
	st, err := replica.Stage(snap)
	if err != nil {
		t.Fatal(err)
	}
	inv := ns["inventory"].(map[string]any)["items"].([]any)
	if len(st.Items) != len(inv) || len(st.Items) != 12 {
		t.Fatalf("staged %d replicas, the inventory lists %d (want 12)", len(st.Items), len(inv))
	}
	for i, it := range st.Items {
		m := inv[i].(map[string]any)
		if it.Kind != m["kind"] || it.ID != m["id"] || it.Digest != m["digest"] {
			t.Fatalf("replica %d: staged %s %s %s, inventory %v", i, it.Kind, it.ID, it.Digest, m)
		}
	}
}

// jsonCompatible turns yaml.v3's map[string]interface{} with int values
// into the client's JSON-compatible form (int64).
func jsonCompatible(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonCompatible(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = jsonCompatible(e)
		}
		return x
	case int:
		return int64(x)
	}
	return v
}

// TestTombstonesDeleteExactlyTheirItems applies releases 1 and 2: release
// 2's set is exactly its inventory, every tombstoned replica is gone, and
// every replica the two releases share with the same digest keeps its row
// untouched (same xmin). Re-applying release 2 writes nothing at all.
func TestTombstonesDeleteExactlyTheirItems(t *testing.T) {
	ctx := context.Background()
	_, pool := newDB(t)
	g := gen{n: 40}
	s := replica.New(pool, replica.Options{})
	r1, err := s.Apply(ctx, g.snapshot(t, 1, 10))
	if err != nil || r1.Outcome != replica.OutcomeApplied || r1.Inserted != len(expectedSet(t, g, 1)) {
		t.Fatalf("release 1: %+v %v", r1, err)
	}
	before := readTables(t, pool)
	if !slices.Equal(before.set(), expectedSet(t, g, 1)) {
		t.Fatal("after release 1 the tables do not hold release 1's inventory")
	}
	snap2 := g.snapshot(t, 2, 11)
	tombs := snap2.Namespace["inventory"].(map[string]any)["tombstones"].([]any)
	r2, err := s.Apply(ctx, snap2)
	if err != nil || r2.Outcome != replica.OutcomeApplied {
		t.Fatalf("release 2: %+v %v", r2, err)
	}
	after := readTables(t, pool)
	if !slices.Equal(after.set(), expectedSet(t, g, 2)) {
		t.Fatalf("after release 2 the tables hold %d replicas, not release 2's inventory of %d", len(after.Rows), len(expectedSet(t, g, 2)))
	}
	if len(tombs) == 0 || r2.Deleted != len(tombs) || r2.Inserted == 0 || r2.Updated == 0 || r2.Kept == 0 {
		t.Fatalf("release 2 should insert, update, keep and delete: %+v (%d tombstones)", r2, len(tombs))
	}
	gone := map[string]bool{}
	for _, tb := range tombs {
		m := tb.(map[string]any)
		gone[m["kind"].(string)+" "+m["id"].(string)] = true
	}
	// Every row of release 1 is either tombstoned (and gone) or still
	// there; the ones with the same digest have the same xmin.
	afterRows := map[string]string{}
	for _, r := range after.Rows {
		afterRows[r[:strings.LastIndexByte(r, ' ')]] = r
	}
	deleted := 0
	for _, r := range before.Rows {
		f := strings.Fields(r)
		k := f[0] + " " + f[1]
		if gone[k] {
			for a := range afterRows {
				if strings.HasPrefix(a, k+" ") {
					t.Fatalf("tombstoned %s is still there", k)
				}
			}
			deleted++
			continue
		}
		if ar, ok := afterRows[f[0]+" "+f[1]+" "+f[2]]; ok && ar != r {
			t.Fatalf("unchanged replica %s was rewritten: %s -> %s", k, r, ar)
		}
		found := false
		for a := range afterRows {
			found = found || strings.HasPrefix(a, k+" ")
		}
		if !found {
			t.Fatalf("%s vanished without a tombstone", k)
		}
	}
	if deleted != len(tombs) {
		t.Fatalf("%d replicas deleted, %d tombstones", deleted, len(tombs))
	}

	again, err := s.Apply(ctx, g.snapshot(t, 2, 11))
	if err != nil || again.Outcome != replica.OutcomeUnchanged {
		t.Fatalf("re-apply: %+v %v, want UNCHANGED", again, err)
	}
	if got := readTables(t, pool); !reflect.DeepEqual(got, after) {
		t.Fatal("re-applying release 2 rewrote rows")
	}
	p, err := s.Applied(ctx, identity)
	if err != nil || p.SnapshotID != snap2.SnapshotID || p.ItemCount != len(after.Rows) || p.SourceEventSequence != 102 {
		t.Fatalf("Applied: %+v %v", p, err)
	}
	items, err := s.Replicas(ctx, identity)
	if err != nil || len(items) != len(after.Rows) {
		t.Fatalf("Replicas: %d %v", len(items), err)
	}
}

// TestRefusalsLeaveTablesUnchanged applies release 2, then offers
// snapshots that must be refused: each refusal names its cause and leaves
// every row and the pointer exactly as they were.
func TestRefusalsLeaveTablesUnchanged(t *testing.T) {
	ctx := context.Background()
	g := gen{n: 21}
	cases := []struct {
		name string
		snap func(t *testing.T) *client.Snapshot
		opts replica.Options
		want error
	}{
		{"replayed release 1 (lower sequence)", func(t *testing.T) *client.Snapshot { return g.snapshot(t, 1, 10) }, replica.Options{}, replica.ErrRegression},
		{"release 1 re-signed later (a rollback, not allowed)", func(t *testing.T) *client.Snapshot { return g.snapshot(t, 1, 12) }, replica.Options{}, replica.ErrRegression},
		{"another snapshot at the applied sequence", func(t *testing.T) *client.Snapshot { return g.snapshot(t, 3, 11) }, replica.Options{}, replica.ErrRegression},
		{"lower revocation epoch", func(t *testing.T) *client.Snapshot {
			s := g.snapshot(t, 3, 12)
			s.Envelope.RevocationEpoch, s.Manifest.RevocationEpoch = 1, 1
			return s
		}, replica.Options{}, replica.ErrRegression},
		{"no signed lease (its replicas would stay live for good)", func(t *testing.T) *client.Snapshot {
			s := g.snapshot(t, 3, 12)
			m := *s.Manifest
			m.ExpiresAt, s.Manifest, s.ExpiresAt = "", &m, time.Time{}
			return s
		}, replica.Options{}, replica.ErrInvalid},
		{"a candidate manifest (a staged release, not activated)", func(t *testing.T) *client.Snapshot {
			s := g.snapshot(t, 3, 12)
			s.Manifest.Phase = bundle.PhaseCandidate
			return s
		}, replica.Options{}, replica.ErrInvalid},
		{"lower source event watermark", func(t *testing.T) *client.Snapshot {
			s := g.snapshot(t, 3, 12)
			s.Envelope.SourceEventSequence = 50
			return s
		}, replica.Options{}, replica.ErrRegression},
		{"partial: an inventory item without its replica", func(t *testing.T) *client.Snapshot {
			ns := g.namespace(3)
			items := inventoryOf(t, ns)
			ns["bindings"] = ns["bindings"].([]any)[1:]
			return snapshotOf(t, 3, ns, withInventory(t, items, nil), 12)
		}, replica.Options{}, replica.ErrIncomplete},
		{"partial: a replica the inventory does not list", func(t *testing.T) *client.Snapshot {
			ns := g.namespace(3)
			items := inventoryOf(t, ns)
			return snapshotOf(t, 3, ns, withInventory(t, items[:len(items)-1], nil), 12)
		}, replica.Options{}, replica.ErrIncomplete},
		{"partial: no inventory", func(t *testing.T) *client.Snapshot {
			return snapshotOf(t, 3, g.namespace(3), nil, 12)
		}, replica.Options{}, replica.ErrIncomplete},
		{"inventory digest does not match", func(t *testing.T) *client.Snapshot {
			ns := g.namespace(3)
			inv := withInventory(t, inventoryOf(t, ns), nil)
			inv["digest"] = "sha256:" + strings.Repeat("0", 64)
			return snapshotOf(t, 3, ns, inv, 12)
		}, replica.Options{}, replica.ErrInvalid},
		{"namespace does not match contentDigest", func(t *testing.T) *client.Snapshot {
			s := g.snapshot(t, 3, 12)
			s.Namespace["tenant"] = "other"
			return s
		}, replica.Options{}, replica.ErrInvalid},
		{"no delivery manifest", func(t *testing.T) *client.Snapshot {
			s := g.snapshot(t, 3, 12)
			s.Manifest = nil
			return s
		}, replica.Options{}, replica.ErrInvalid},
		{"release 4 skipping 3 leaves unlisted replicas, kept", func(t *testing.T) *client.Snapshot { return g.snapshot(t, 4, 12) }, replica.Options{KeepUnlisted: true}, replica.ErrUnlisted},
	}
	// One database: every refusal must leave it exactly as release 2 left it.
	_, pool := newDB(t)
	for k := int64(1); k <= 2; k++ {
		if _, err := replica.New(pool, replica.Options{}).Apply(ctx, g.snapshot(t, k, 9+k)); err != nil {
			t.Fatal(err)
		}
	}
	before := readTables(t, pool)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := replica.New(pool, tc.opts).Apply(ctx, tc.snap(t))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %+v %v, want %v", res, err, tc.want)
			}
			if after := readTables(t, pool); !reflect.DeepEqual(after, before) {
				t.Fatalf("refused apply changed the tables")
			}
		})
	}
}

// TestRollbackAndSkipWhenAllowed: with AllowRollback a signed rollback
// (release 1 at a later sequence) and a skipped release materialize
// exactly their inventories: what releases 2 and 3 removed or added is not
// left behind. The default deletes the replicas no tombstone names (with
// only tombstones deleting, a service that skipped a release — promote's
// catch-up records those it passes over — stayed at its applied snapshot,
// removed bindings still readable, while status called it applied).
func TestRollbackAndSkipWhenAllowed(t *testing.T) {
	ctx := context.Background()
	_, pool := newDB(t)
	g := gen{n: 21}
	s := replica.New(pool, replica.Options{AllowRollback: true})
	for _, step := range []struct{ k, seq int64 }{{1, 10}, {2, 11}, {1, 12}, {4, 13}} {
		res, err := s.Apply(ctx, g.snapshot(t, step.k, step.seq))
		if err != nil {
			t.Fatalf("release %d at %d: %v", step.k, step.seq, err)
		}
		if got := readTables(t, pool).set(); !slices.Equal(got, expectedSet(t, g, step.k)) {
			t.Fatalf("release %d at %d: tables do not hold its inventory (%+v)", step.k, step.seq, res)
		}
	}
}

// TestRoles: the loader may read and write the replicas and the pointer and
// nothing else; the reader may only read them.
func TestRoles(t *testing.T) {
	ctx := context.Background()
	db, loader := newDB(t)
	owner := db.Pool(t)
	want := map[string][]string{
		replica.LoaderRole: {
			"configpub_knowledge.applied_snapshot INSERT", "configpub_knowledge.applied_snapshot SELECT", "configpub_knowledge.applied_snapshot UPDATE",
			"configpub_knowledge.live_replica SELECT",
			"configpub_knowledge.replica DELETE", "configpub_knowledge.replica INSERT", "configpub_knowledge.replica SELECT", "configpub_knowledge.replica UPDATE",
			"configpub_knowledge.schema_migration SELECT", "schema configpub_knowledge USAGE",
		},
		replica.ReaderRole: {"configpub_knowledge.applied_snapshot SELECT", "configpub_knowledge.live_replica SELECT",
			"configpub_knowledge.replica SELECT", "schema configpub_knowledge USAGE"},
	}
	for role, w := range want {
		got, err := pgtest.Grants(ctx, owner, role)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s may:\n%s\nwant:\n%s", role, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
	if _, err := replica.New(loader, replica.Options{}).Apply(ctx, gen{n: 3}.snapshot(t, 1, 1)); err != nil {
		t.Fatalf("loader cannot apply: %v", err)
	}
	reader := db.PoolURL(t, db.URLFor(t, replica.ReaderRole))
	if _, err := replica.New(reader, replica.Options{}).Apply(ctx, gen{n: 3}.snapshot(t, 2, 2)); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("reader applied a snapshot: %v", err)
	}
	if _, err := loader.Exec(ctx, "DELETE FROM configpub_knowledge.applied_snapshot"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("loader deleted the applied pointer: %v", err)
	}
	if _, err := loader.Exec(ctx, "SELECT count(*) FROM configpub.artifact"); err == nil {
		t.Fatal("loader read configpub's own tables")
	}
}

// renewedAt is g's snapshot of release k at manifest sequence seq as a
// lease renewal issued at issued would carry it, its lease ending at
// expires.
func renewedAt(t testing.TB, g gen, k, seq int64, issued, expires time.Time) *client.Snapshot {
	t.Helper()
	s := g.snapshot(t, k, seq)
	m := *s.Manifest
	m.IssuedAt = issued.UTC().Format(time.RFC3339)
	s.Manifest, s.ExpiresAt = &m, expires.UTC()
	return s
}

// TestLeaseFollowsRenewalsForMonths: the applied pointer records the signed
// lease of what the loader applied, and each renewal of the applied
// snapshot (same sequence, later issuedAt) moves it forward without writing
// a replica, over 90 days of daily renewals; a replayed older renewal moves
// nothing. Once the loader stops (no renewal after day 60), the readers'
// view live_replica holds nothing for the identity: the materialized
// replicas fail closed as the runtime client does — they stayed readable
// for good.
func TestLeaseFollowsRenewalsForMonths(t *testing.T) {
	ctx := context.Background()
	db, pool := newDB(t)
	g := gen{n: 9}
	s := replica.New(pool, replica.Options{})
	start := time.Now().UTC().Truncate(time.Second).Add(-90 * 24 * time.Hour)
	lease := 25 * time.Hour
	if _, err := s.Apply(ctx, renewedAt(t, g, 1, 10, start, start.Add(lease))); err != nil {
		t.Fatal(err)
	}
	live := func() int {
		t.Helper()
		var n int
		if err := db.Pool(t).QueryRow(ctx, `SELECT count(*) FROM configpub_knowledge.live_replica
			WHERE host = $1 AND service_id = $2 AND env_tag = $3`, identity.Host, identity.ServiceID, identity.EnvTag).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := readTables(t, pool)
	for day := 1; day <= 60; day++ {
		issued := start.Add(time.Duration(day) * 24 * time.Hour)
		res, err := s.Apply(ctx, renewedAt(t, g, 1, 10, issued, issued.Add(lease)))
		if err != nil || res.Outcome != replica.OutcomeUnchanged || !res.LeaseRenewed {
			t.Fatalf("day %d renewal: %+v %v, want UNCHANGED with the lease renewed", day, res, err)
		}
		// The same renewal again, and the day before's, move nothing.
		for _, again := range []time.Time{issued, issued.Add(-24 * time.Hour)} {
			if res, err := s.Apply(ctx, renewedAt(t, g, 1, 10, again, again.Add(lease))); err != nil || res.LeaseRenewed {
				t.Fatalf("day %d: a replayed renewal issued %s: %+v %v, want nothing moved", day, again, res, err)
			}
		}
		p, err := s.Applied(ctx, identity)
		if err != nil {
			t.Fatal(err)
		}
		if want := issued.Add(lease); !p.LeaseExpiresAt.Equal(want) || !p.ManifestIssuedAt.Equal(issued) {
			t.Fatalf("day %d: pointer lease %s issued %s, want %s and %s", day, p.LeaseExpiresAt, p.ManifestIssuedAt, want, issued)
		}
	}
	if after := readTables(t, pool); !reflect.DeepEqual(after.set(), before.set()) {
		t.Fatal("renewals rewrote the replica set")
	}
	if n := live(); n != 0 {
		t.Fatalf("live_replica holds %d replicas of an identity whose lease ended on day 61 of 90, want none", n)
	}
	// A renewal today brings them back.
	now := time.Now().UTC().Truncate(time.Second)
	if res, err := s.Apply(ctx, renewedAt(t, g, 1, 10, now, now.Add(lease))); err != nil || !res.LeaseRenewed {
		t.Fatalf("today's renewal: %+v %v", res, err)
	}
	if n, want := live(), len(expectedSet(t, g, 1)); n != want {
		t.Fatalf("live_replica after today's renewal: %d replicas, want %d", n, want)
	}
}

// TestAnOlderManifestOfTheAppliedSnapshot: a loader whose runtime still
// holds the applied snapshot under a manifest from before a re-signing
// (lease resign, revoke --epoch) is told so — it was told "a replayed
// delivery", alarming for a benign case — and nothing changes.
func TestAnOlderManifestOfTheAppliedSnapshot(t *testing.T) {
	ctx := context.Background()
	_, pool := newDB(t)
	g := gen{n: 5}
	s := replica.New(pool, replica.Options{})
	if _, err := s.Apply(ctx, g.snapshot(t, 1, 12)); err != nil {
		t.Fatal(err)
	}
	before := readTables(t, pool)
	_, err := s.Apply(ctx, g.snapshot(t, 1, 11))
	if !errors.Is(err, replica.ErrRegression) || !strings.Contains(err.Error(), "re-signed since") || strings.Contains(err.Error(), "replayed") {
		t.Fatalf("the applied snapshot under an older manifest: %v, want ErrRegression saying it was re-signed since", err)
	}
	if after := readTables(t, pool); !reflect.DeepEqual(after, before) {
		t.Fatal("the refusal changed the tables")
	}
}

// TestAShorterRenewedLeaseIsRecorded: the operator shortens the lease (168h
// to 24h, say); the next renewal of the applied snapshot is issued later
// but ends earlier than the lease before it. The runtime client takes the
// renewal's lease and fails closed when it ends; the pointer kept the
// longer one (it moved only forward), so live_replica served the replicas
// for days after the runtime client had stopped. A renewal issued later now
// records its lease whatever it is; a replayed older one still moves
// nothing.
func TestAShorterRenewedLeaseIsRecorded(t *testing.T) {
	ctx := context.Background()
	db, pool := newDB(t)
	g := gen{n: 5}
	s := replica.New(pool, replica.Options{})
	now := time.Now().UTC().Truncate(time.Second)
	first := now.Add(-3 * 24 * time.Hour)
	if _, err := s.Apply(ctx, renewedAt(t, g, 1, 10, first, first.Add(168*time.Hour))); err != nil {
		t.Fatal(err)
	}
	renewed := now.Add(-2 * 24 * time.Hour)
	res, err := s.Apply(ctx, renewedAt(t, g, 1, 10, renewed, renewed.Add(24*time.Hour)))
	if err != nil || res.Outcome != replica.OutcomeUnchanged || !res.LeaseRenewed {
		t.Fatalf("a renewal with a shorter lease: %+v %v, want UNCHANGED with the lease renewed", res, err)
	}
	p, err := s.Applied(ctx, identity)
	if err != nil {
		t.Fatal(err)
	}
	if want := renewed.Add(24 * time.Hour); !p.LeaseExpiresAt.Equal(want) || !p.ManifestIssuedAt.Equal(renewed) {
		t.Fatalf("pointer lease %s issued %s, want the renewal's %s and %s", p.LeaseExpiresAt, p.ManifestIssuedAt, want, renewed)
	}
	var n int
	if err := db.Pool(t).QueryRow(ctx, `SELECT count(*) FROM configpub_knowledge.live_replica
		WHERE host = $1 AND service_id = $2 AND env_tag = $3`, identity.Host, identity.ServiceID, identity.EnvTag).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("live_replica holds %d replicas a day after the renewed lease ended (the runtime client stopped then), want none", n)
	}
	// The first manifest replayed (earlier issuedAt, longer lease) moves nothing back.
	if res, err := s.Apply(ctx, renewedAt(t, g, 1, 10, first, first.Add(168*time.Hour))); err != nil || res.LeaseRenewed {
		t.Fatalf("a replayed earlier lease: %+v %v, want nothing moved", res, err)
	}
	if p2, err := s.Applied(ctx, identity); err != nil || !p2.LeaseExpiresAt.Equal(p.LeaseExpiresAt) {
		t.Fatalf("after a replayed earlier lease: %+v %v, want the lease kept at %s", p2, err, p.LeaseExpiresAt)
	}
}

// TestAPointerWithoutALeaseRecordsItAtTheNextApply: a pointer applied
// before schema version 2 has no lease (NULL) and live_replica shows it
// without end. Its snapshot applied again under the same manifest — the
// loader restarting, polling — left it so: only a later renewal recorded a
// lease, and an identity whose renewals stopped (retired, revoked, the
// control plane gone) stayed live for good. The applied manifest's lease
// is now recorded at its next apply.
func TestAPointerWithoutALeaseRecordsItAtTheNextApply(t *testing.T) {
	ctx := context.Background()
	db, pool := newDB(t)
	g := gen{n: 5}
	s := replica.New(pool, replica.Options{})
	issued := time.Now().UTC().Truncate(time.Second).Add(-3 * 24 * time.Hour)
	snap := renewedAt(t, g, 1, 10, issued, issued.Add(25*time.Hour))
	if _, err := s.Apply(ctx, snap); err != nil {
		t.Fatal(err)
	}
	// What migration 002 leaves of a pointer applied before it.
	if _, err := db.Pool(t).Exec(ctx, "UPDATE configpub_knowledge.applied_snapshot SET lease_expires_at = NULL"); err != nil {
		t.Fatal(err)
	}
	before := readTables(t, pool)
	res, err := s.Apply(ctx, snap)
	if err != nil || res.Outcome != replica.OutcomeUnchanged || !res.LeaseRenewed {
		t.Fatalf("the applied snapshot again, its pointer without a lease: %+v %v, want UNCHANGED with the lease recorded", res, err)
	}
	p, err := s.Applied(ctx, identity)
	if err != nil || !p.LeaseExpiresAt.Equal(issued.Add(25*time.Hour)) {
		t.Fatalf("pointer %+v %v, want the applied manifest's lease %s", p, err, issued.Add(25*time.Hour))
	}
	if after := readTables(t, pool); !reflect.DeepEqual(after.set(), before.set()) {
		t.Fatal("recording the lease rewrote the replica set")
	}
	var n int
	if err := db.Pool(t).QueryRow(ctx, `SELECT count(*) FROM configpub_knowledge.live_replica
		WHERE host = $1 AND service_id = $2 AND env_tag = $3`, identity.Host, identity.ServiceID, identity.EnvTag).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("live_replica holds %d replicas two days after the applied lease ended, want none", n)
	}
	// Once recorded, the same manifest again records nothing.
	if res, err := s.Apply(ctx, snap); err != nil || res.LeaseRenewed {
		t.Fatalf("the same manifest a third time: %+v %v, want nothing recorded", res, err)
	}
}
