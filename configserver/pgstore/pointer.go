package pgstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

// notRevoked filters snapshots revoked by id or by publication.
const notRevoked = `NOT EXISTS (SELECT 1 FROM configpub.revocation r
	WHERE r.snapshot_id = s.snapshot_id OR r.publication_id = s.publication_id)`

// pointerQuery selects current pointers with their snapshot metadata; the
// caller appends a WHERE clause continuation.
// A retired pointer is selected whatever its snapshot, so that it is
// answered 410 Gone; a revoked one is left out (404). The retirement test
// sits inside the anti-join so that the plan stays one.
const pointerQuery = `SELECT p.host, p.service_id, p.env_tag, p.snapshot_id::text,
	s.audience, s.publication_id::text, s.policy_digest, s.content_digest, s.artifact_digest, s.release_version,
	p.manifest, p.manifest_signature, p.manifest_key_id, p.retired_at IS NOT NULL
FROM configpub.current_pointer p
JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
WHERE NOT EXISTS (SELECT 1 FROM configpub.revocation r
	WHERE p.retired_at IS NULL AND (r.snapshot_id = s.snapshot_id OR r.publication_id = s.publication_id))`

const allPointersQuery = pointerQuery

// batchPointerQuery selects the pointers of the identities given as three
// parallel arrays (host, service_id, env_tag).
const batchPointerQuery = pointerQuery + ` AND (p.host, p.service_id, p.env_tag) IN
	(SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))`

// snapshotQuery selects one snapshot of an identity with the latest delivery
// manifest issued for it, if any.
const snapshotQuery = `SELECT s.audience, s.publication_id::text, s.policy_digest, s.content_digest,
	s.artifact_digest, s.release_version, m.manifest, m.signature, m.key_id
FROM configpub.config_snapshot s
LEFT JOIN LATERAL (
	SELECT d.manifest, d.signature, d.key_id FROM configpub.delivery_manifest d
	WHERE d.snapshot_id = s.snapshot_id AND d.host = s.host AND d.service_id = s.service_id AND d.env_tag = s.env_tag
	ORDER BY d.issued_at DESC, d.sequence DESC LIMIT 1) m ON true
WHERE s.snapshot_id = $1 AND s.host = $2 AND s.service_id = $3 AND s.env_tag = $4 AND ` + notRevoked

// servedManifest is the part of a bundle.DeliveryManifest the server
// cross-checks and serves: decoding only these fields (the others are
// skipped unallocated), each string as a view of the stored bytes
// (jsonString), keeps loading 100,000 pointers cheap.
type servedManifest struct {
	Type           jsonString `json:"type"`
	Host           jsonString `json:"host"`
	ServiceID      jsonString `json:"serviceId"`
	EnvTag         jsonString `json:"envTag"`
	Audience       jsonString `json:"audience"`
	SnapshotID     jsonString `json:"snapshotId"`
	PublicationID  jsonString `json:"publicationId"`
	ReleaseVersion int64      `json:"releaseVersion"`
	ArtifactDigest jsonString `json:"artifactDigest"`
	ContentDigest  jsonString `json:"contentDigest"`
	PolicyDigest   jsonString `json:"policyDigest"`
	ValidFrom      jsonString `json:"validFrom"`
	RefreshAfter   jsonString `json:"refreshAfter"`
	ExpiresAt      jsonString `json:"expiresAt"`
	Phase          jsonString `json:"phase,omitempty"`
}

// jsonString is a JSON string member decoded without allocating: the
// member's token as it appears in the document (quotes included), so only
// valid while the document's bytes are. nil stands for an absent member or
// null, whose value is "" (as when decoding into a string).
type jsonString []byte

// UnmarshalJSON keeps a view of b, a string token of the document being
// decoded (encoding/json has checked the document is valid JSON).
func (s *jsonString) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*s = nil
	case len(b) >= 2 && b[0] == '"':
		*s = b
	default:
		return fmt.Errorf("JSON value %.20s is not a string", b)
	}
	return nil
}

// plain returns the string's bytes, when they are its value: no escape
// and valid UTF-8 (which decoding into a string would replace).
func (s jsonString) plain() ([]byte, bool) {
	if s == nil {
		return nil, true
	}
	v := s[1 : len(s)-1]
	return v, bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v)
}

// String returns the string's value.
func (s jsonString) String() string {
	if v, ok := s.plain(); ok {
		return string(v)
	}
	var v string
	_ = json.Unmarshal(s, &v) // a token the decoder accepted
	return v
}

// is reports whether the string's value is v, without allocating for a
// plain string.
func (s jsonString) is(v string) bool {
	if b, ok := s.plain(); ok {
		return string(b) == v
	}
	return s.String() == v
}

// shared returns the string's value, the copy shared through in when in
// is set.
func (s jsonString) shared(in *interner) string {
	switch b, ok := s.plain(); {
	case in == nil:
		return s.String()
	case ok:
		return in.internBytes(b)
	default:
		return in.intern(s.String())
	}
}

// pointerRow is one scanned pointer or snapshot row.
type pointerRow struct {
	host, serviceID, envTag, snapshotID         string
	audience, publicationID                     string
	policyDigest, contentDigest, artifactDigest string
	releaseVersion                              int64
	manifest                                    []byte
	signature, keyID                            string // "" when NULL
	retired                                     bool   // the identity is retired (410 Gone)
	// phase is the manifest phase the row must carry: "" for current
	// pointers and historical snapshots, bundle.PhaseCandidate for a
	// candidate pointer.
	phase string
}

// rawPointer is one pointerQuery or changedPointersQuery row as the driver
// holds it: its byte fields are valid only until the next row is read.
// Scanning into it allocates nothing, so that a reload compares a row with
// the entry it already holds before copying anything, and then copies only
// what a new entry keeps (row), sharing the repeated strings.
type rawPointer struct {
	host, serviceID, envTag, snapshotID         pgtype.DriverBytes
	audience, publicationID                     pgtype.DriverBytes
	policyDigest, contentDigest, artifactDigest pgtype.DriverBytes
	releaseVersion                              int64
	manifest, signature, keyID                  pgtype.DriverBytes
	retired                                     bool // the identity is retired (410 Gone)
	revoked                                     bool // the snapshot is revoked (changedPointersQuery only)
}

// scanArgs returns the scan targets of a pointerQuery row, with revoked
// for a changedPointersQuery row.
func (r *rawPointer) scanArgs(revoked bool) []any {
	args := []any{&r.host, &r.serviceID, &r.envTag, &r.snapshotID,
		&r.audience, &r.publicationID, &r.policyDigest, &r.contentDigest, &r.artifactDigest, &r.releaseVersion,
		&r.manifest, &r.signature, &r.keyID, &r.retired}
	if revoked {
		args = append(args, &r.revoked)
	}
	return args
}

// identity returns the row's identity: a copy of the host, and the service
// and environment shared through in.
func (r *rawPointer) identity(in *interner) bundle.Identity {
	return bundle.Identity{Host: string(r.host), ServiceID: in.internBytes(r.serviceID), EnvTag: in.internBytes(r.envTag)}
}

// row copies r, whose identity is id, into a pointerRow: the strings many
// pointers repeat (audience, publication, policy digest, key id) shared
// through in, the others copied once.
func (r *rawPointer) row(id bundle.Identity, in *interner) pointerRow {
	p := pointerRow{host: id.Host, serviceID: id.ServiceID, envTag: id.EnvTag, snapshotID: string(r.snapshotID),
		audience: in.internBytes(r.audience), publicationID: in.internBytes(r.publicationID),
		policyDigest: in.internBytes(r.policyDigest), contentDigest: string(r.contentDigest),
		artifactDigest: string(r.artifactDigest), releaseVersion: r.releaseVersion,
		manifest: bytes.Clone(r.manifest), retired: r.retired}
	p.signature, p.keyID = string(r.signature), in.internBytes(r.keyID)
	return p
}

func (r *pointerRow) identity() bundle.Identity {
	return bundle.Identity{Host: r.host, ServiceID: r.serviceID, EnvTag: r.envTag}
}

// delivery builds the servable delivery (without its body). The stored
// manifest must parse and agree with the snapshot row on every field the
// headers carry; otherwise the row is an integrity error and is not served.
// With in set, the lease strings are shared through it; with decoded set,
// the decode target comes from it and returns to it (a load of many rows
// then does not leave one behind per row).
func (r *pointerRow) delivery(in *interner, decoded *sync.Pool) (*configserver.Delivery, error) {
	d := &configserver.Delivery{
		Identity:       r.identity(),
		Audience:       r.audience,
		SnapshotID:     r.snapshotID,
		PublicationID:  r.publicationID,
		PolicyDigest:   r.policyDigest,
		ContentDigest:  r.contentDigest,
		ArtifactDigest: r.artifactDigest,
		ReleaseVersion: r.releaseVersion,
	}
	if r.manifest == nil {
		d.Prepare()
		return d, nil // a historical snapshot never delivered
	}
	// The promoter stored canonical bytes and the runtime verifies their
	// signature; here a plain decode suffices to cross-check the fields the
	// headers carry (and is several times cheaper than a canonical re-check,
	// which matters when a large activation reloads thousands of pointers).
	var m *servedManifest
	if decoded != nil {
		m, _ = decoded.Get().(*servedManifest)
	}
	if m == nil {
		m = new(servedManifest)
	}
	defer func() {
		if decoded != nil {
			*m = servedManifest{} // no view of r.manifest stays behind
			decoded.Put(m)
		}
	}()
	if err := json.Unmarshal(r.manifest, m); err != nil || !m.Type.is(bundle.DeliveryManifestType) {
		return nil, integrityError("%s: stored delivery manifest is not a %s document", d.Identity, bundle.DeliveryManifestType)
	}
	if !m.Phase.is(r.phase) {
		return nil, integrityError("%s: stored delivery manifest phase %q where %q belongs", d.Identity, m.Phase, r.phase)
	}
	for _, f := range []struct {
		name     string
		manifest jsonString
		row      string
	}{
		{"host", m.Host, r.host},
		{"serviceId", m.ServiceID, r.serviceID},
		{"envTag", m.EnvTag, r.envTag},
		{"audience", m.Audience, r.audience},
		{"snapshotId", m.SnapshotID, r.snapshotID},
		{"publicationId", m.PublicationID, r.publicationID},
		{"policyDigest", m.PolicyDigest, r.policyDigest},
		{"contentDigest", m.ContentDigest, r.contentDigest},
		{"artifactDigest", m.ArtifactDigest, r.artifactDigest},
	} {
		if !f.manifest.is(f.row) {
			return nil, integrityError("%s: delivery manifest %s %q differs from the snapshot's %q",
				d.Identity, f.name, f.manifest, f.row)
		}
	}
	if m.ReleaseVersion != r.releaseVersion {
		return nil, integrityError("%s: delivery manifest releaseVersion %q differs from the snapshot's %q",
			d.Identity, strconv.FormatInt(m.ReleaseVersion, 10), strconv.FormatInt(r.releaseVersion, 10))
	}
	if r.signature == "" || r.keyID == "" {
		return nil, integrityError("%s: delivery manifest stored without signature or key id", d.Identity)
	}
	d.Manifest = r.manifest
	d.ManifestSignature = r.signature
	d.ManifestKeyID = r.keyID
	// The lease strings: the same for every pointer an activation or
	// renewal wrote.
	d.ValidFrom, d.RefreshAfter, d.ExpiresAt = m.ValidFrom.shared(in), m.RefreshAfter.shared(in), m.ExpiresAt.shared(in)
	d.Prepare()
	return d, nil
}

// interner shares the strings many pointers repeat (environment, service,
// audience, publication, key id, policy digest, lease times), so that a
// store holding 100,000 identities keeps one copy of each rather than one
// per row. It is bounded: past maxInterned strings it starts afresh. It
// always returns a string equal to its argument, and never one that
// aliases a byte slice it was given.
type interner struct {
	mu sync.Mutex
	m  map[string]string
}

const maxInterned = 1 << 14

// intern returns the shared copy of s, adding s when there is none.
func (in *interner) intern(s string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	in.addLocked(s)
	return s
}

// internBytes returns the shared copy of string(b), adding a copy of b
// when there is none: it allocates only then.
func (in *interner) internBytes(b []byte) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	s := string(b)
	in.addLocked(s)
	return s
}

func (in *interner) addLocked(s string) {
	if in.m == nil || len(in.m) >= maxInterned {
		in.m = make(map[string]string)
	}
	in.m[s] = s
}
