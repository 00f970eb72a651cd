package replica

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/render"
)

// Item is one published control replica: a knowledge base, a retrieval
// profile, an index generation or an Agent binding, identified by kind and
// id, with the digest the inventory lists and its content as canonical JSON
// (RFC 8785) bytes, which is what the digest covers.
type Item struct {
	Kind    string
	ID      string
	Digest  string
	Content []byte
}

// Position is what an applied pointer records about its snapshot: the ids,
// the versions that must not regress (delivery-manifest sequence,
// revocation epoch, release version, source event watermark, policy
// version) and the digests.
type Position struct {
	SnapshotID              string
	PublicationID           string
	PolicySnapshotID        string
	ReleaseVersion          int64
	PolicyVersion           int64
	SourceEventSequence     int64 // the source event watermark
	RevocationEpoch         int64
	CompatibilityGeneration int64
	ManifestSequence        int64
	ManifestIssuedAt        time.Time
	// LeaseExpiresAt is the end of the signed lease of that manifest
	// (the runtime client fails closed there); zero when not recorded.
	LeaseExpiresAt  time.Time
	ArtifactDigest  string
	ContentDigest   string
	PolicyDigest    string
	InventoryDigest string
}

// Staged is a snapshot's complete replica set, validated and ready to be
// materialized: the identity and position of its applied pointer, every
// replica (sorted by kind, then id) and the tombstones (items a previous
// release had, to delete).
type Staged struct {
	Identity bundle.Identity
	Position
	Items      []Item
	Tombstones []bundle.InventoryItem
}

// Stage validates a verified Knowledge snapshot (a *client.Snapshot the
// runtime client returned, which carries its signed delivery manifest) and
// returns its replica set. It does not check the manifest signature again;
// it recomputes contentDigest over the knowledgePolicy namespace, the
// inventory digest over items and tombstones, and every replica's digest
// from its content, refuses a snapshot without a signed lease (its
// replicas would stay live for good), and requires the inventory to list exactly the
// replicas the snapshot carries: a replica missing from the inventory, an
// inventory item without its replica, or a tombstone that is also listed is
// a refusal (ErrIncomplete or ErrInvalid). Nothing is written.
func Stage(snap *client.Snapshot) (*Staged, error) {
	if snap == nil {
		return nil, fmt.Errorf("stage knowledge replicas: %w: no snapshot", ErrInvalid)
	}
	env, m := &snap.Envelope, snap.Manifest
	fail := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("stage knowledge replicas of snapshot %s: %w: %s", snap.SnapshotID, sentinel, fmt.Sprintf(format, args...))
	}
	if m == nil {
		return nil, fail(ErrInvalid, "no signed delivery manifest: a snapshot is materialized only with one")
	}
	if m.IsCandidate() {
		// A candidate manifest vouches for a staged release's snapshot,
		// prefetched and held, which no runtime runs until activation.
		return nil, fail(ErrInvalid, "a candidate delivery manifest (phase %q): a staged release is materialized only once activated", m.Phase)
	}
	if env.Audience != bundle.AudienceKnowledge || m.Audience != bundle.AudienceKnowledge {
		return nil, fail(ErrInvalid, "audience %q (manifest %q), want %q", env.Audience, m.Audience, bundle.AudienceKnowledge)
	}
	if m.SnapshotID != snap.SnapshotID || m.ContentDigest != env.ContentDigest || m.ReleaseVersion != env.ReleaseVersion ||
		m.Identity() != (bundle.Identity{Host: env.Host, ServiceID: env.ServiceID, EnvTag: env.EnvTag}) {
		return nil, fail(ErrInvalid, "the delivery manifest does not describe this snapshot")
	}
	issued, err := time.Parse(time.RFC3339Nano, m.IssuedAt)
	if err != nil {
		return nil, fail(ErrInvalid, "manifest.issuedAt %q: %v", m.IssuedAt, err)
	}
	lease := snap.ExpiresAt // what the client verified: the lease, bounded as it bounds it
	if lease.IsZero() && m.ExpiresAt != "" {
		if lease, err = time.Parse(time.RFC3339Nano, m.ExpiresAt); err != nil {
			return nil, fail(ErrInvalid, "manifest.expiresAt %q: %v", m.ExpiresAt, err)
		}
	}
	if lease.IsZero() {
		// Materialized without a lease, the replicas would stay in
		// live_replica for good: the runtime client never returns such a
		// snapshot (it requires manifest.expiresAt).
		return nil, fail(ErrInvalid, "no signed lease (manifest.expiresAt): a snapshot is materialized only with one")
	}
	cb, err := canonical(snap.Namespace)
	if err != nil {
		return nil, fail(ErrInvalid, "knowledgePolicy: %v", err)
	}
	if d := jcs.BytesDigest(cb); d != env.ContentDigest {
		return nil, fail(ErrInvalid, "knowledgePolicy digests to %s, runtimePolicy.contentDigest is %s", d, env.ContentDigest)
	}
	st := &Staged{Identity: m.Identity(), Position: Position{
		SnapshotID: m.SnapshotID, PublicationID: env.PublicationID, PolicySnapshotID: env.PolicySnapshotID,
		ReleaseVersion: env.ReleaseVersion, PolicyVersion: env.PolicyVersion, SourceEventSequence: env.SourceEventSequence,
		RevocationEpoch: max(m.RevocationEpoch, env.RevocationEpoch), CompatibilityGeneration: env.CompatibilityGeneration,
		ManifestSequence: m.Sequence, ManifestIssuedAt: issued.UTC(), LeaseExpiresAt: lease.UTC(),
		ArtifactDigest: snap.ArtifactDigest, ContentDigest: env.ContentDigest, PolicyDigest: env.PolicyDigest,
	}}
	inv, ok := snap.Namespace["inventory"].(map[string]any)
	if !ok {
		return nil, fail(ErrIncomplete, "knowledgePolicy.inventory is absent")
	}
	listed, err := inventoryList(inv, "items")
	if err != nil {
		return nil, fail(ErrInvalid, "%v", err)
	}
	if st.Tombstones, err = inventoryList(inv, "tombstones"); err != nil {
		return nil, fail(ErrInvalid, "%v", err)
	}
	db, err := canonical(map[string]any{"items": inv["items"], "tombstones": inv["tombstones"]})
	if err != nil {
		return nil, fail(ErrInvalid, "knowledgePolicy.inventory: %v", err)
	}
	st.InventoryDigest, _ = inv["digest"].(string)
	if d := jcs.BytesDigest(db); d != st.InventoryDigest {
		return nil, fail(ErrInvalid, "knowledgePolicy.inventory.digest is %q, items and tombstones digest to %s", st.InventoryDigest, d)
	}
	carried, err := replicas(snap.Namespace)
	if err != nil {
		return nil, fail(ErrInvalid, "%v", err)
	}
	seen := make(map[key]bool, len(listed))
	for _, it := range listed {
		k := key{it.Kind, it.ID}
		if seen[k] {
			return nil, fail(ErrInvalid, "inventory lists %s/%s twice", it.Kind, it.ID)
		}
		seen[k] = true
		c, ok := carried[k]
		if !ok {
			return nil, fail(ErrIncomplete, "inventory lists %s %s but the snapshot carries no such replica", it.Kind, it.ID)
		}
		if c.Digest != it.Digest {
			return nil, fail(ErrInvalid, "%s %s digests to %s, the inventory lists %s", it.Kind, it.ID, c.Digest, it.Digest)
		}
		st.Items = append(st.Items, c)
	}
	if len(carried) != len(listed) {
		for _, k := range sortedKeys(carried) {
			if !seen[k] {
				return nil, fail(ErrIncomplete, "the snapshot carries %s %s but the inventory does not list it", k.kind, k.id)
			}
		}
	}
	tomb := make(map[key]bool, len(st.Tombstones))
	for _, t := range st.Tombstones {
		k := key{t.Kind, t.ID}
		if seen[k] || tomb[k] {
			return nil, fail(ErrInvalid, "tombstone %s %s is also listed as an item or twice", t.Kind, t.ID)
		}
		tomb[k] = true
	}
	sort.Slice(st.Items, func(i, j int) bool {
		return key{st.Items[i].Kind, st.Items[i].ID}.less(key{st.Items[j].Kind, st.Items[j].ID})
	})
	return st, nil
}

// key identifies a replica.
type key struct{ kind, id string }

func (a key) less(b key) bool {
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.id < b.id
}

func sortedKeys(m map[key]Item) []key {
	out := make([]key, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].less(out[j]) })
	return out
}

// inventoryList reads inventory.<field>: a list of {kind, id, digest}.
func inventoryList(inv map[string]any, field string) ([]bundle.InventoryItem, error) {
	raw, ok := inv[field].([]any)
	if !ok {
		if inv[field] == nil {
			return nil, fmt.Errorf("knowledgePolicy.inventory.%s is absent (%w)", field, ErrIncomplete)
		}
		return nil, fmt.Errorf("knowledgePolicy.inventory.%s is not a list", field)
	}
	out := make([]bundle.InventoryItem, 0, len(raw))
	for i, r := range raw {
		m, _ := r.(map[string]any)
		kind, _ := m["kind"].(string)
		id, _ := m["id"].(string)
		d, _ := m["digest"].(string)
		if kind == "" || id == "" || !digest.Valid(d) || len(m) != 3 {
			return nil, fmt.Errorf("knowledgePolicy.inventory.%s[%d] is not {kind, id, digest: sha256:<hex>}", field, i)
		}
		out = append(out, bundle.InventoryItem{Kind: kind, ID: id, Digest: d})
	}
	return out, nil
}

// Replica kinds, as the compiler lists them in a Knowledge inventory.
const (
	KindKnowledgeBase    = "knowledgeBase"
	KindRetrievalProfile = "retrievalProfile"
	KindIndexGeneration  = "indexGeneration"
	KindBinding          = "binding"
)

// replicas derives every control replica the knowledgePolicy namespace
// carries, with its digest: each knowledge base (without a credential
// reference), each of its retrieval profiles (id kb/profile) and index
// generations (id kb/generation), and each binding (id
// agent/knowledgeBase/retrievalProfile).
func replicas(ns map[string]any) (map[key]Item, error) {
	out := map[key]Item{}
	add := func(kind, id string, v any) error {
		if id == "" {
			return fmt.Errorf("a %s replica without an id", kind)
		}
		b, err := canonical(v)
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, id, err)
		}
		k := key{kind, id}
		if _, dup := out[k]; dup {
			return fmt.Errorf("%s %s appears twice", kind, id)
		}
		out[k] = Item{Kind: kind, ID: id, Digest: jcs.BytesDigest(b), Content: b}
		return nil
	}
	kbs, _ := ns["knowledgeBases"].([]any)
	for _, raw := range kbs {
		kb, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("knowledgePolicy.knowledgeBases holds a %T", raw)
		}
		name, _ := kb["name"].(string)
		c := make(map[string]any, len(kb))
		for k, v := range kb {
			if k != "credentialRef" {
				c[k] = v
			}
		}
		if err := add(KindKnowledgeBase, name, c); err != nil {
			return nil, err
		}
		profiles, _ := kb["retrievalProfiles"].([]any)
		for _, p := range profiles {
			pm, _ := p.(map[string]any)
			pn, _ := pm["name"].(string)
			if err := add(KindRetrievalProfile, name+"/"+pn, p); err != nil {
				return nil, err
			}
		}
		gens, _ := kb["indexGenerations"].([]any)
		for _, g := range gens {
			n, ok := integer(g)
			if !ok {
				return nil, fmt.Errorf("knowledge base %s: index generation %v is not an integer", name, g)
			}
			if err := add(KindIndexGeneration, name+"/"+strconv.FormatInt(n, 10), g); err != nil {
				return nil, err
			}
		}
	}
	bindings, _ := ns["bindings"].([]any)
	for _, raw := range bindings {
		b, _ := raw.(map[string]any)
		agent, _ := b["agent"].(string)
		kb, _ := b["knowledgeBase"].(string)
		prof, _ := b["retrievalProfile"].(string)
		if agent == "" || kb == "" || prof == "" {
			return nil, fmt.Errorf("a binding without agent, knowledgeBase or retrievalProfile")
		}
		if err := add(KindBinding, agent+"/"+kb+"/"+prof, b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}

// canonical returns the RFC 8785 bytes of a JSON-compatible value as the
// runtime client hands it over (map[string]any, []any, string, int64,
// float64, bool, nil).
func canonical(v any) ([]byte, error) {
	t, err := valueOf(v)
	if err != nil {
		return nil, err
	}
	return render.AppendCanonical(nil, t)
}

func valueOf(x any) (*render.Value, error) {
	switch t := x.(type) {
	case nil:
		return render.Null(), nil
	case bool:
		return render.Bool(t), nil
	case string:
		return render.String(t), nil
	case int64:
		return render.Int(t), nil
	case int:
		return render.Int(int64(t)), nil
	case float64:
		return render.Float(t), nil
	case []any:
		l := render.List()
		for _, e := range t {
			v, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			l.Items = append(l.Items, v)
		}
		return l, nil
	case map[string]any:
		m := render.Map()
		for k, e := range t {
			v, err := valueOf(e)
			if err != nil {
				return nil, err
			}
			m.Add(k, v)
		}
		return m, nil
	}
	return nil, fmt.Errorf("a %T is not a JSON value", x)
}
