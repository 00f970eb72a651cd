package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/parallel"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// The sharded release manifest: a root file releases/<envTag>.yaml with the
// release parameters, the release-wide inputs, lease profiles, the creation
// times of the releases its targets were created by, the subjects and
// workflow ledger shared by several hosts, and one entry (host, target
// count, digest of the exact bytes) per shard releases/<envTag>/<host>.yaml.
// A shard holds one host's subjects, workflows, the digest of the host's
// input files and its targets, one line each. A shard states nothing that
// changes with the release (no release version, no createdAt), so a release
// that changes one host's targets rewrites the root and that host's shard
// only. Per-target fields that follow from the release (publication,
// envelope times, schema, epoch, generation, lease digests, snapshot id,
// subject policy) are not written when they have their derived value; a
// value that differs from it is written explicitly (in the row's trailing
// map) so the file still says exactly what was edited.

// ShardKind is the kind of a release manifest shard.
const ShardKind = "ReleaseShard"

// SnapshotIDDomain is the domain-separation prefix of snapshot ids: a
// snapshot id is DeriveID(SnapshotIDDomain, host, serviceId, envTag,
// artifactDigest).
const SnapshotIDDomain = "configpub/snapshot/v1"

// SnapshotID derives the snapshot id of a target's artifact.
func SnapshotID(host, serviceID, envTag, artifactDigest string) string {
	return DeriveID(SnapshotIDDomain, host, serviceID, envTag, artifactDigest)
}

// PolicySnapshotIDDomain is the domain-separation prefix of policy
// snapshot ids: DeriveID(PolicySnapshotIDDomain, kind, name, policyDigest).
const PolicySnapshotIDDomain = "configpub/policy-snapshot/v1"

// PolicySnapshotID derives the policy snapshot id of a subject's policy.
func PolicySnapshotID(kind, name, policyDigest string) string {
	return DeriveID(PolicySnapshotIDDomain, kind, name, policyDigest)
}

// RootPath returns the path of an environment's release manifest root in
// the policy repository.
func RootPath(envTag string) string { return "releases/" + envTag + ".yaml" }

// ShardPath returns the path of one host's release manifest shard.
func ShardPath(envTag, host string) string { return "releases/" + envTag + "/" + host + ".yaml" }

// ShardDir returns the directory of an environment's shards.
func ShardDir(envTag string) string { return "releases/" + envTag }

// ReleaseFile is one file of a release manifest: its path in the policy
// repository and its exact bytes.
type ReleaseFile struct {
	Path  string
	Bytes []byte
}

// HostInputs is the digest of the input files that only one host's targets
// read: "sha256:" over the JCS bytes of their [{path, digest}] list, sorted
// by path.
type HostInputs struct {
	Host   string `json:"host"`
	Digest string `json:"digest"`
}

// InputsDigest returns the digest of a list of inputs (see HostInputs).
// The canonical bytes are written directly, member names in RFC 8785
// order ("digest" before "path"), not through a value tree: a large
// release digests a few hundred thousand inputs at its end.
func InputsDigest(in []Input) (string, error) {
	h := sha256.New()
	b := make([]byte, 0, 256)
	b = append(b, '[')
	var err error
	for i, x := range in {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"digest":`...)
		if b, err = jcs.AppendString(b, x.Digest); err != nil {
			return "", fmt.Errorf("input %d digest: %w", i, err)
		}
		b = append(b, `,"path":`...)
		if b, err = jcs.AppendString(b, x.Path); err != nil {
			return "", fmt.Errorf("input %d path: %w", i, err)
		}
		b = append(b, '}')
		h.Write(b)
		b = b[:0]
	}
	b = append(b, ']')
	h.Write(b)
	return digest.FromSum([sha256.Size]byte(h.Sum(nil))).String(), nil
}

// ShardRef is one shard entry of the root: host, number of targets and the
// digest of the shard's exact bytes.
type ShardRef struct {
	Host    string
	Targets int64
	Digest  string
}

// releaseTime is the createdAt of a release that created carried-over
// snapshots.
type releaseTime struct {
	ReleaseVersion int64
	CreatedAt      string
}

// archiveMagic opens a release archive: the files of a sharded release in
// one byte string (root first, then the shards by host), each introduced by
// a "--- # <path>" document marker, so it reads as a YAML stream too.
const archiveMagic = "# configpub release archive v1\n"

const archiveSep = "--- # "

// Archive joins the files of a release into one byte string, the form in
// which a release is stored, hashed and handed between packages.
func Archive(files []ReleaseFile) []byte {
	n := 0
	for _, f := range files {
		n += ArchiveEntrySize(f.Path, len(f.Bytes))
	}
	b := NewArchive(n)
	for _, f := range files {
		b = AppendArchive(b, f.Path, f.Bytes)
	}
	return b
}

// NewArchive returns an empty release archive with room for size more
// bytes; AppendArchive adds its files, root first, so a reader can build
// an archive one file at a time without holding the files separately.
func NewArchive(size int) []byte {
	return append(make([]byte, 0, len(archiveMagic)+max(size, 0)), archiveMagic...)
}

// ArchiveEntrySize is the number of bytes AppendArchive adds for a file
// of size bytes at path: room to ask NewArchive for.
func ArchiveEntrySize(path string, size int) int { return len(archiveSep) + len(path) + 1 + size }

// AppendArchive appends one file to a release archive.
func AppendArchive(b []byte, path string, data []byte) []byte {
	b = append(b, archiveSep...)
	b = append(b, path...)
	b = append(b, '\n')
	return append(b, data...)
}

// IsArchive reports whether b is a release archive (else it is a
// single-file release manifest of the layout before shards).
func IsArchive(b []byte) bool { return bytes.HasPrefix(b, []byte(archiveMagic)) }

// SplitArchive returns the files of a release archive, in order.
func SplitArchive(b []byte) ([]ReleaseFile, error) {
	if !IsArchive(b) {
		return nil, fmt.Errorf("%w: not a release archive", ErrInvalidManifest)
	}
	rest := b[len(archiveMagic):]
	var out []ReleaseFile
	for len(rest) > 0 {
		if !bytes.HasPrefix(rest, []byte(archiveSep)) {
			return nil, fmt.Errorf("%w: release archive: want %q at a file's start", ErrInvalidManifest, archiveSep)
		}
		rest = rest[len(archiveSep):]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("%w: release archive: unterminated file name", ErrInvalidManifest)
		}
		name := string(rest[:nl])
		rest = rest[nl+1:]
		end := bytes.Index(rest, []byte("\n"+archiveSep))
		var body []byte
		if end < 0 {
			body, rest = rest, nil
		} else {
			body, rest = rest[:end+1], rest[end+1:]
		}
		out = append(out, ReleaseFile{Path: name, Bytes: body})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty release archive", ErrInvalidManifest)
	}
	return out, nil
}

// field is one top-level member of a rendered release file: a value in
// block style, or rows (each a JSON array on its own line).
type field struct {
	key  string
	val  *render.Value // block style when rows is nil
	rows []*render.Value
	row  bool
}

func block(k string, v *render.Value) field      { return field{key: k, val: v} }
func rows(k string, r []*render.Value) field     { return field{key: k, rows: r, row: true} }
func rowOf(items ...*render.Value) *render.Value { return render.List(items...) }

// rowsAt builds the row of each index.
func rowsAt(idx []int32, row func(int32) *render.Value) []*render.Value {
	out := make([]*render.Value, len(idx))
	for i, k := range idx {
		out[i] = row(k)
	}
	return out
}
func withExtra(r *render.Value, x *render.Value) *render.Value {
	if x != nil && len(x.Keys) > 0 {
		r.Items = append(r.Items, x)
	}
	return r
}

// renderFile renders fields as a configpub-yaml/1 document (rows as JSON
// arrays, which are YAML flow sequences), appended to b, and returns the
// bytes and the value the document denotes.
func renderFile(b []byte, fields []field) ([]byte, *render.Value, error) {
	v := render.Map()
	var err error
	for _, f := range fields {
		if !f.row {
			if b, err = render.AppendYAML(b, render.Map().Add(f.key, f.val)); err != nil {
				return nil, nil, err
			}
			v.Add(f.key, f.val)
			continue
		}
		l := render.List(f.rows...)
		v.Add(f.key, l)
		if len(f.rows) == 0 {
			b = append(b, f.key+": []\n"...)
			continue
		}
		b = append(b, f.key+":\n"...)
		for _, r := range f.rows {
			b = append(b, "  - "...)
			if b, err = render.AppendCanonical(b, r); err != nil {
				return nil, nil, err
			}
			b = append(b, '\n')
		}
	}
	return b, v, nil
}

// derivedShared holds what derived computes once per release rather than
// once per target: the publication id of each release that created
// targets, and the lease times of each (createdAt, lease profile). The
// targets of a large release then share those strings (and the hashing
// and time arithmetic behind them is done a few times, not per target).
// A parse also holds each value of a few columns most targets share once
// (one).
type derivedShared struct {
	publications map[int64]string
	times        map[[3]string][2]string // refreshAfter, expiresAt by createdAt, validFor, refreshAfter
	values       map[string]string
}

func newDerivedShared() *derivedShared {
	return &derivedShared{publications: map[int64]string{}, times: map[[3]string][2]string{}, values: map[string]string{}}
}

// one returns the first copy of s this release held.
func (ds *derivedShared) one(s string) string {
	if v, ok := ds.values[s]; ok {
		return v
	}
	ds.values[s] = s
	return s
}

func (ds *derivedShared) publication(env string, rv int64) string {
	id, ok := ds.publications[rv]
	if !ok {
		id = PublicationID(env, rv)
		ds.publications[rv] = id
	}
	return id
}

// leaseTimes returns refreshAfter and expiresAt of a snapshot created at
// created under prof ("" and "" when either cannot be read).
func (ds *derivedShared) leaseTimes(created string, prof *LeaseProfile) (refresh, expires string) {
	k := [3]string{created, prof.ValidFor, prof.RefreshAfter}
	if v, ok := ds.times[k]; ok {
		return v[0], v[1]
	}
	if c, err := ParseTime(created); err == nil {
		vf, err1 := time.ParseDuration(prof.ValidFor)
		ra, err2 := time.ParseDuration(prof.RefreshAfter)
		if err1 == nil && err2 == nil {
			refresh, expires = c.Add(ra).Format(TimeFormat), c.Add(vf).Format(TimeFormat)
		}
	}
	ds.times[k] = [2]string{refresh, expires}
	return refresh, expires
}

// derived returns the fields of t that follow from the release, its shard
// and t's row: what a target entry holds when nothing was edited. ds
// shares the strings many targets have in common (one goroutine at a
// time).
func (m *Manifest) derived(ds *derivedShared, t *TargetEntry, subj *Subject, prof *LeaseProfile, created string) TargetEntry {
	d := TargetEntry{
		Host: t.Host, ServiceID: t.ServiceID, Audience: t.Audience, SubjectKind: t.SubjectKind, SubjectName: t.SubjectName,
		LeaseProfile: t.LeaseProfile, ReleaseVersion: t.ReleaseVersion,
		ContentDigest: t.ContentDigest, PropertySetDigest: t.PropertySetDigest, ArtifactDigest: t.ArtifactDigest,
		PublicationID:       ds.publication(m.EnvTag, t.ReleaseVersion),
		SourceEventSequence: t.ReleaseVersion, SchemaVersion: m.SchemaVersion,
		RevocationEpoch: m.RevocationEpoch, CompatibilityGeneration: m.CompatibilityGeneration,
		SnapshotID: SnapshotID(t.Host, t.ServiceID, m.EnvTag, t.ArtifactDigest),
		Changed:    t.ReleaseVersion == m.ReleaseVersion,
		CreatedAt:  created, ValidFrom: created,
	}
	if subj != nil {
		d.PolicySnapshotID, d.PolicyVersion, d.PolicyDigest = subj.PolicySnapshotID, subj.PolicyVersion, subj.PolicyDigest
	}
	if prof != nil {
		d.LeaseProfileDigest, d.DeliveryLease = prof.Digest, prof.Delivery
		d.RefreshAfter, d.ExpiresAt = ds.leaseTimes(created, prof)
	}
	return d
}

// targetExtra is the trailing map of a target row: the optional members and
// every field whose value is not the derived one.
type targetExtra struct {
	SnapshotID              *string         `json:"snapshotId,omitempty"`
	PublicationID           *string         `json:"publicationId,omitempty"`
	PolicySnapshotID        *string         `json:"policySnapshotId,omitempty"`
	PolicyVersion           *int64          `json:"policyVersion,omitempty"`
	PolicyDigest            *string         `json:"policyDigest,omitempty"`
	LeaseProfileDigest      *string         `json:"leaseProfileDigest,omitempty"`
	SourceEventSequence     *int64          `json:"sourceEventSequence,omitempty"`
	SchemaVersion           *int            `json:"schemaVersion,omitempty"`
	RevocationEpoch         *int64          `json:"revocationEpoch,omitempty"`
	CompatibilityGeneration *int64          `json:"compatibilityGeneration,omitempty"`
	CreatedAt               *string         `json:"createdAt,omitempty"`
	ValidFrom               *string         `json:"validFrom,omitempty"`
	RefreshAfter            *string         `json:"refreshAfter,omitempty"`
	ExpiresAt               *string         `json:"expiresAt,omitempty"`
	DeliveryLease           *Lease          `json:"deliveryLease,omitempty"`
	Changed                 *bool           `json:"changed,omitempty"`
	Previous                *Publication    `json:"previous,omitempty"`
	Inventory               []InventoryItem `json:"inventory,omitempty"`
	Tombstones              []InventoryItem `json:"tombstones,omitempty"`
}

func extraValue(t, d *TargetEntry) *render.Value {
	s, i := render.String, render.Int
	x := render.Map()
	str := func(k, got, want string) {
		if got != want {
			x.Add(k, s(got))
		}
	}
	num := func(k string, got, want int64) {
		if got != want {
			x.Add(k, i(got))
		}
	}
	str("snapshotId", t.SnapshotID, d.SnapshotID)
	str("publicationId", t.PublicationID, d.PublicationID)
	str("policySnapshotId", t.PolicySnapshotID, d.PolicySnapshotID)
	num("policyVersion", t.PolicyVersion, d.PolicyVersion)
	str("policyDigest", t.PolicyDigest, d.PolicyDigest)
	str("leaseProfileDigest", t.LeaseProfileDigest, d.LeaseProfileDigest)
	num("sourceEventSequence", t.SourceEventSequence, d.SourceEventSequence)
	num("schemaVersion", int64(t.SchemaVersion), int64(d.SchemaVersion))
	num("revocationEpoch", t.RevocationEpoch, d.RevocationEpoch)
	num("compatibilityGeneration", t.CompatibilityGeneration, d.CompatibilityGeneration)
	str("createdAt", t.CreatedAt, d.CreatedAt)
	str("validFrom", t.ValidFrom, d.ValidFrom)
	str("refreshAfter", t.RefreshAfter, d.RefreshAfter)
	str("expiresAt", t.ExpiresAt, d.ExpiresAt)
	if t.DeliveryLease != d.DeliveryLease {
		x.Add("deliveryLease", render.Map().Add("refreshAfter", s(t.DeliveryLease.RefreshAfter)).Add("expiresAfter", s(t.DeliveryLease.ExpiresAfter)))
	}
	if t.Changed != d.Changed {
		x.Add("changed", render.Bool(t.Changed))
	}
	if t.Previous != nil {
		x.Add("previous", render.Map().Add("publicationId", s(t.Previous.PublicationID)).Add("policyDigest", s(t.Previous.PolicyDigest)))
	}
	if len(t.Inventory) > 0 {
		x.Add("inventory", items(t.Inventory))
	}
	if len(t.Tombstones) > 0 {
		x.Add("tombstones", items(t.Tombstones))
	}
	return x
}

func (x *targetExtra) apply(t *TargetEntry) {
	set(&t.SnapshotID, x.SnapshotID)
	set(&t.PublicationID, x.PublicationID)
	set(&t.PolicySnapshotID, x.PolicySnapshotID)
	set(&t.PolicyVersion, x.PolicyVersion)
	set(&t.PolicyDigest, x.PolicyDigest)
	set(&t.LeaseProfileDigest, x.LeaseProfileDigest)
	set(&t.SourceEventSequence, x.SourceEventSequence)
	set(&t.SchemaVersion, x.SchemaVersion)
	set(&t.RevocationEpoch, x.RevocationEpoch)
	set(&t.CompatibilityGeneration, x.CompatibilityGeneration)
	set(&t.CreatedAt, x.CreatedAt)
	set(&t.ValidFrom, x.ValidFrom)
	set(&t.RefreshAfter, x.RefreshAfter)
	set(&t.ExpiresAt, x.ExpiresAt)
	set(&t.DeliveryLease, x.DeliveryLease)
	set(&t.Changed, x.Changed)
	t.Previous, t.Inventory, t.Tombstones = x.Previous, x.Inventory, x.Tombstones
}

// set assigns *v to *dst when v is not nil.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// index maps the manifest's lease profiles by name and its subjects by
// subjectKey, pointing into m's slices (so m must not be re-sorted while
// they are used).
func (m *Manifest) index() (map[string]*LeaseProfile, map[string]*Subject) {
	profiles := make(map[string]*LeaseProfile, len(m.LeaseProfiles))
	for k := range m.LeaseProfiles {
		profiles[m.LeaseProfiles[k].Name] = &m.LeaseProfiles[k]
	}
	subjects := make(map[string]*Subject, len(m.Subjects))
	for k := range m.Subjects {
		subjects[subjectKey(m.Subjects[k].Kind, m.Subjects[k].Name)] = &m.Subjects[k]
	}
	return profiles, subjects
}

func subjectKey(kind, name string) string { return kind + "/" + name }

// Files renders the release as its files: the root first, then one shard
// per host in host order. It sets ReleaseDigest: "sha256:" over the JCS
// bytes of the root without its releaseDigest (the root names every shard's
// digest, so the release digest covers the shards too).
func (m *Manifest) Files() ([]ReleaseFile, error) {
	files := make([]ReleaseFile, 1, 1+len(m.HostInputs))
	err := m.eachFile(false, func(path string, b []byte, root bool) {
		if root {
			files[0] = ReleaseFile{Path: path, Bytes: b}
			return
		}
		files = append(files, ReleaseFile{Path: path, Bytes: b})
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// MarshalSize is Marshal with room for size bytes, and a 32nd more: the
// size of an earlier archive of the environment's release, so that a large
// archive is allocated once. The shards are rendered one at a time into the archive
// (not held as files first), and the root, rendered last since it names
// every shard's digest, is put in front.
func (m *Manifest) MarshalSize(size int) ([]byte, error) {
	if size > 0 {
		size += size/32 + 4096 // a release a little larger than the last
	}
	b := NewArchive(size)
	err := m.eachFile(true, func(path string, data []byte, root bool) {
		if !root {
			b = AppendArchive(b, path, data)
			return
		}
		// The root goes first, before the shards.
		b = slices.Insert(b, len(archiveMagic), AppendArchive(nil, path, data)...)
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// eachFile renders the release's files, calling emit with each shard in
// host order and then with the root, and sets ReleaseDigest. With reuse,
// every shard is rendered into the same buffer: emit must copy what it
// keeps of one.
func (m *Manifest) eachFile(reuse bool, emit func(path string, b []byte, root bool)) error {
	s, i := render.String, render.Int
	profiles, subjects := m.index()
	ds := newDerivedShared()
	hostInputs := map[string]string{}
	for _, h := range m.HostInputs {
		hostInputs[h.Host] = h.Digest
	}
	// Hosts: every target's, every placed subject's and workflow's.
	hostSet := map[string]bool{}
	for k := range m.Targets {
		hostSet[m.Targets[k].Host] = true
	}
	for _, h := range m.HostInputs {
		hostSet[h.Host] = true
	}
	for _, x := range m.Subjects {
		if x.Host != "" {
			hostSet[x.Host] = true
		}
	}
	for _, w := range m.Workflows {
		if w.Host != "" {
			hostSet[w.Host] = true
		}
	}
	hosts := make([]string, 0, len(hostSet))
	for h := range hostSet {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)

	created := map[int64]string{m.ReleaseVersion: m.CreatedAt}
	var times []releaseTime
	for k := range m.Targets {
		rv := m.Targets[k].ReleaseVersion
		if _, ok := created[rv]; !ok {
			created[rv] = m.Targets[k].CreatedAt
			times = append(times, releaseTime{ReleaseVersion: rv, CreatedAt: m.Targets[k].CreatedAt})
		}
	}
	sort.Slice(times, func(a, b int) bool { return times[a].ReleaseVersion < times[b].ReleaseVersion })

	subjectRow := func(x *Subject) *render.Value {
		r := rowOf(s(subjectKey(x.Kind, x.Name)), i(x.PolicyVersion), s(x.PolicyDigest))
		if want := PolicySnapshotID(x.Kind, x.Name, x.PolicyDigest); x.PolicySnapshotID != want {
			r = withExtra(r, render.Map().Add("policySnapshotId", s(x.PolicySnapshotID)))
		}
		return r
	}
	workflowRow := func(w *WorkflowVersion) *render.Value {
		return rowOf(s(w.Name), s(w.WfDefID), s(w.Version), s(w.State), s(w.Digest))
	}
	// A host's subject and workflow rows are built when its shard is
	// rendered (a large release has a subject per target): the maps hold
	// indexes.
	var rootSubjects, rootWorkflows []*render.Value
	hostSubjects := map[string][]int32{}
	hostWorkflows := map[string][]int32{}
	for k := range m.Subjects {
		x := &m.Subjects[k]
		if x.Host == "" {
			rootSubjects = append(rootSubjects, subjectRow(x))
		} else {
			hostSubjects[x.Host] = append(hostSubjects[x.Host], int32(k))
		}
	}
	for k := range m.Workflows {
		w := &m.Workflows[k]
		if w.Host == "" {
			rootWorkflows = append(rootWorkflows, workflowRow(w))
		} else {
			hostWorkflows[w.Host] = append(hostWorkflows[w.Host], int32(k))
		}
	}

	shardRows := make([]*render.Value, 0, len(hosts))
	var scratch []byte
	k := 0
	for _, h := range hosts {
		var trows []*render.Value
		for ; k < len(m.Targets) && m.Targets[k].Host == h; k++ {
			t := &m.Targets[k]
			d := m.derived(ds, t, subjects[subjectKey(t.SubjectKind, t.SubjectName)], profiles[t.LeaseProfile], created[t.ReleaseVersion])
			trows = append(trows, withExtra(rowOf(s(t.ServiceID), s(t.Audience), s(subjectKey(t.SubjectKind, t.SubjectName)), s(t.LeaseProfile),
				i(t.ReleaseVersion), s(t.ContentDigest), s(t.PropertySetDigest), s(t.ArtifactDigest)), extraValue(t, &d)))
		}
		if k < len(m.Targets) && m.Targets[k].Host < h {
			return fmt.Errorf("%w: targets are not sorted by host", ErrInvalidManifest)
		}
		in := hostInputs[h]
		if in == "" {
			d, err := InputsDigest(nil)
			if err != nil {
				return err
			}
			in = d
		}
		var dst []byte
		if reuse {
			dst = scratch[:0]
		}
		b, _, err := renderFile(dst, []field{
			block("apiVersion", s(m.APIVersion)), block("kind", s(ShardKind)), block("envTag", s(m.EnvTag)), block("host", s(h)),
			block("inputsDigest", s(in)),
			rows("subjects", rowsAt(hostSubjects[h], func(k int32) *render.Value { return subjectRow(&m.Subjects[k]) })),
			rows("workflows", rowsAt(hostWorkflows[h], func(k int32) *render.Value { return workflowRow(&m.Workflows[k]) })),
			rows("targets", trows),
		})
		if err != nil {
			return fmt.Errorf("render release shard %s: %w", h, err)
		}
		if reuse {
			scratch = b
		}
		shardRows = append(shardRows, rowOf(s(h), i(int64(len(trows))), s(render.BytesDigest(b))))
		emit(ShardPath(m.EnvTag, h), b, false)
	}
	if k != len(m.Targets) {
		return fmt.Errorf("%w: targets are not sorted by host", ErrInvalidManifest)
	}

	inputs, profs := inputsValue(m.Inputs), profilesValue(m.LeaseProfiles)
	trows := make([]*render.Value, 0, len(times))
	for _, t := range times {
		trows = append(trows, rowOf(i(t.ReleaseVersion), s(t.CreatedAt)))
	}
	ledger := make([]*render.Value, 0, len(m.WorkflowLedger))
	for _, e := range m.WorkflowLedger {
		ledger = append(ledger, rowOf(s(e.WfDefID), s(e.Version), s(e.Digest), i(e.PublishedIn)))
	}
	head := []field{
		block("apiVersion", s(m.APIVersion)), block("kind", s(m.Kind)), block("envTag", s(m.EnvTag)),
		block("releaseVersion", i(m.ReleaseVersion)), block("baseReleaseVersion", i(m.BaseReleaseVersion)),
		block("createdAt", s(m.CreatedAt)), block("sourceEventSequence", i(m.SourceEventSequence)),
		block("compatibilityGeneration", i(m.CompatibilityGeneration)), block("revocationEpoch", i(m.RevocationEpoch)),
		block("schemaVersion", i(int64(m.SchemaVersion))), block("renderer", s(m.Renderer)),
		block("inputs", inputs), block("leaseProfiles", profs),
		rows("createdBy", trows), rows("subjects", rootSubjects), rows("workflows", rootWorkflows),
		rows("workflowLedger", ledger), rows("shards", shardRows),
	}
	b, v, err := renderFile(nil, head)
	if err != nil {
		return fmt.Errorf("render release manifest: %w", err)
	}
	d, err := digestOf(v)
	if err != nil {
		return err
	}
	m.ReleaseDigest = d
	if b, err = render.AppendYAML(b, render.Map().Add("releaseDigest", s(d))); err != nil {
		return fmt.Errorf("render release manifest: %w", err)
	}
	emit(RootPath(m.EnvTag), b, true)
	return nil
}

// rootDoc is the root file as decoded.
type rootDoc struct {
	ReleaseHeader
	Inputs         []Input             `json:"inputs"`
	LeaseProfiles  []LeaseProfile      `json:"leaseProfiles"`
	CreatedBy      [][]json.RawMessage `json:"createdBy"`
	Subjects       [][]json.RawMessage `json:"subjects"`
	Workflows      [][]json.RawMessage `json:"workflows"`
	WorkflowLedger [][]json.RawMessage `json:"workflowLedger"`
	Shards         [][]json.RawMessage `json:"shards"`
	ReleaseDigest  string              `json:"releaseDigest"`
}

type shardDoc struct {
	APIVersion   string              `json:"apiVersion"`
	Kind         string              `json:"kind"`
	EnvTag       string              `json:"envTag"`
	Host         string              `json:"host"`
	InputsDigest string              `json:"inputsDigest"`
	Subjects     [][]json.RawMessage `json:"subjects"`
	Workflows    [][]json.RawMessage `json:"workflows"`
	Targets      [][]json.RawMessage `json:"targets"`
}

// decodeStrict decodes a release file: YAML refusals as in
// internal/yamlstrict, then unknown fields refused.
func decodeStrict(file string, b []byte, dst any) (*render.Value, error) {
	doc, err := yamlstrict.Parse(file, b)
	if err != nil {
		return nil, err
	}
	canon, err := render.Canonical(doc.Value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(canon))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return doc.Value, nil
}

// decodeRow decodes row r of list into dst (one pointer per column) and
// the optional trailing map into extra (nil: none allowed).
func decodeRow(list string, n int, r []json.RawMessage, extra any, dst ...any) error {
	if len(r) != len(dst) && (extra == nil || len(r) != len(dst)+1) {
		return fmt.Errorf("%w: %s[%d]: %d columns, want %d", ErrInvalidManifest, list, n, len(r), len(dst))
	}
	for k, d := range dst {
		if err := decodeColumn(r[k], d); err != nil {
			return fmt.Errorf("%w: %s[%d] column %d: %v", ErrInvalidManifest, list, n, k+1, err)
		}
	}
	if len(r) == len(dst)+1 {
		dec := json.NewDecoder(bytes.NewReader(r[len(dst)]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(extra); err != nil {
			return fmt.Errorf("%w: %s[%d] trailing map: %v", ErrInvalidManifest, list, n, err)
		}
	}
	return nil
}

func splitSubject(s string) (kind, name string, ok bool) {
	kind, name, ok = strings.Cut(s, "/")
	return kind, name, ok && kind != "" && name != ""
}

// ShardRefs reads the shard entries of a root file (for readers that must
// fetch the shards before parsing, such as a Git history walk).
func ShardRefs(file string, root []byte) ([]ShardRef, error) {
	var r rootDoc
	if _, err := decodeStrict(file, root, &r); err != nil {
		return nil, fmt.Errorf("parse release manifest: %w", err)
	}
	return r.shardRefs()
}

// Root is what a sharded release's root file states on its own: the
// release parameters, the inputs listed in the root (those more than one
// host reads, and the repository and environment documents), the shard
// entries and the release digest.
type Root struct {
	ReleaseHeader
	Inputs        []Input
	Shards        []ShardRef
	ReleaseDigest string
}

// ParseRoot reads a sharded release's root file strictly, without its
// shards: the release parameters (checked as ReleaseHeader.Validate does),
// the shard entries and the release digest (not checked: it covers the
// shards). It is what a reader needs to tell which release the files are
// and to compare them with another release by their bytes, without
// parsing every target; ParseFiles checks the whole release.
func ParseRoot(file string, root []byte) (*Root, error) {
	var r rootDoc
	if _, err := decodeStrict(file, root, &r); err != nil {
		return nil, fmt.Errorf("parse release manifest: %w", err)
	}
	if err := r.ReleaseHeader.Validate(); err != nil {
		return nil, fmt.Errorf("parse release manifest %s: %w", file, err)
	}
	refs, err := r.shardRefs()
	if err != nil {
		return nil, fmt.Errorf("parse release manifest %s: %w", file, err)
	}
	if !digest.Valid(r.ReleaseDigest) {
		return nil, fmt.Errorf("parse release manifest %s: %w: releaseDigest %q is not sha256:<64 hex>", file, ErrInvalidManifest, r.ReleaseDigest)
	}
	return &Root{ReleaseHeader: r.ReleaseHeader, Inputs: r.Inputs, Shards: refs, ReleaseDigest: r.ReleaseDigest}, nil
}

// shardInputsLine starts the line of a shard that states its inputs
// digest, as Files writes it.
const shardInputsLine = "\ninputsDigest: \""

// ShardInputsDigest returns the inputsDigest a shard's header states,
// read from its bytes without parsing the shard (Files writes it on the
// header's fifth line), or "" when b has no such line in its header. A
// shard that is not in the form Files writes may state another value than
// ParseFiles would read: the result tells only what the bytes say.
func ShardInputsDigest(b []byte) string {
	head := b[:min(len(b), 512)]
	i := bytes.Index(head, []byte(shardInputsLine))
	if i < 0 {
		return ""
	}
	rest := head[i+len(shardInputsLine):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || !digest.Valid(string(rest[:j])) {
		return ""
	}
	return string(rest[:j])
}

func (r *rootDoc) shardRefs() ([]ShardRef, error) {
	out := make([]ShardRef, 0, len(r.Shards))
	for n, row := range r.Shards {
		var s ShardRef
		if err := decodeRow("shards", n, row, nil, &s.Host, &s.Targets, &s.Digest); err != nil {
			return nil, err
		}
		if err := CheckHost(s.Host); err != nil {
			return nil, fmt.Errorf("%w: shards[%d]: %v", ErrInvalidManifest, n, err)
		}
		if n > 0 && s.Host <= out[n-1].Host {
			return nil, fmt.Errorf("%w: shards[%d]: %s: shards must be sorted by host and unique", ErrInvalidManifest, n, s.Host)
		}
		if !digest.Valid(s.Digest) {
			return nil, fmt.Errorf("%w: shards[%d].digest %q is not sha256:<64 hex>", ErrInvalidManifest, n, s.Digest)
		}
		out = append(out, s)
	}
	return out, nil
}

// IsSharded reports whether a release manifest root is of the sharded
// layout (it lists shards) rather than a single file with every target.
// A root as Files writes it is told by its bytes ("shards:" starts a
// line); any other (a quoted or escaped key, a flow mapping: YAML that
// ParseRoot and ParseFiles read all the same) is parsed to tell.
func IsSharded(root []byte) bool {
	if bytes.Contains(root, []byte("\nshards:")) {
		return true
	}
	doc, err := yamlstrict.Parse("release root", root)
	return err == nil && doc.Value != nil && doc.Value.Kind == render.KindMap && doc.Value.Get("shards") != nil
}

// ParseFiles reads a sharded release strictly from its files (root first,
// then every shard it lists, in its order): YAML refusals, unknown fields,
// a shard whose bytes do not match the root's digest, a shard that is not
// listed, a manifest that breaks its own invariants (Validate) and a
// releaseDigest that does not match the root are errors.
func ParseFiles(files []ReleaseFile) (*Manifest, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no files", ErrInvalidManifest)
	}
	p, err := parseRelease(files[0], len(files)-1, func(k int, _ ShardRef) (ReleaseFile, error) { return files[k+1], nil })
	if err != nil {
		return nil, err
	}
	return p.m, nil
}

// ParseRelease reads a sharded release strictly, as ParseFiles does, from
// its root file and the shards the root lists, each read through shard
// when it is decoded (k is its index in the root's list). shard is called
// once per shard, from several goroutines at once, in no particular
// order; a shard's bytes are let go once it is decoded, so the release's
// files are never all held. An error from shard is returned as it is.
func ParseRelease(root ReleaseFile, shard func(k int, ref ShardRef) (ReleaseFile, error)) (*Manifest, error) {
	p, err := parseRelease(root, -1, shard)
	if err != nil {
		return nil, err
	}
	return p.m, nil
}

// Outline is a sharded release read and checked whole, as ParseRelease
// reads it, that holds its release-wide fields, inputs, lease profiles,
// subjects and workflows but not its target entries (Manifest.Targets is
// nil): those of one shard are decoded again when they are asked for
// (Entries). A compiler building the next release on a large one needs
// one host's entries at a time.
type Outline struct {
	// Manifest is the release without its targets.
	Manifest *Manifest
	// Shards are the root's shard entries, in its order.
	Shards []ShardRef

	created  map[int64]string
	profiles map[string]*LeaseProfile
	subjects map[string]*Subject
}

// ParseOutline reads and checks a sharded release as ParseRelease does,
// then lets go of its target entries.
func ParseOutline(root ReleaseFile, shard func(k int, ref ShardRef) (ReleaseFile, error)) (*Outline, error) {
	return parseOutline(root, -1, shard)
}

// ParseOutlineFiles is ParseOutline over a release's files, as ParseFiles
// reads them (the root, then each shard in the root's order).
func ParseOutlineFiles(files []ReleaseFile) (*Outline, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("%w: no files", ErrInvalidManifest)
	}
	return parseOutline(files[0], len(files)-1, func(k int, _ ShardRef) (ReleaseFile, error) { return files[k+1], nil })
}

func parseOutline(root ReleaseFile, given int, shard func(k int, ref ShardRef) (ReleaseFile, error)) (*Outline, error) {
	p, err := parseRelease(root, given, shard)
	if err != nil {
		return nil, err
	}
	p.m.Targets = nil
	o := &Outline{Manifest: p.m, Shards: p.refs, created: p.created}
	o.profiles, o.subjects = p.m.index()
	return o, nil
}

// TargetCount returns the number of targets of the release.
func (o *Outline) TargetCount() int {
	n := 0
	for _, ref := range o.Shards {
		n += int(ref.Targets)
	}
	return n
}

// Entries returns the target entries of shard k of the release, read from
// f: exactly those ParseRelease returns for it. f must be the shard the
// root records (its path and the digest of its bytes are checked, as when
// the release was read). It may be called from several goroutines at once.
func (o *Outline) Entries(k int, f ReleaseFile) ([]TargetEntry, error) {
	if k < 0 || k >= len(o.Shards) {
		return nil, fmt.Errorf("parse release manifest: %w: shard %d of %d", ErrInvalidManifest, k, len(o.Shards))
	}
	sh, err := parseShard(o.Manifest.ReleaseHeader, o.Shards[k], f)
	if err != nil {
		return nil, err
	}
	out := make([]TargetEntry, len(sh.targets))
	ds := newDerivedShared()
	for n := range sh.targets {
		out[n] = o.Manifest.entryOf(ds, o.Shards[k].Host, &sh.targets[n], o.created, o.profiles, o.subjects)
	}
	return out, nil
}

// entryOf returns the target entry of row r of host's shard: the fields
// that follow from the release (created: the createdAt of each release by
// version), then what the row's trailing map states.
func (m *Manifest) entryOf(ds *derivedShared, host string, r *targetRow, created map[int64]string, profiles map[string]*LeaseProfile, subjects map[string]*Subject) TargetEntry {
	t := TargetEntry{Host: host, ServiceID: r.serviceID, Audience: r.audience,
		SubjectKind: r.subjectKind, SubjectName: r.subjectName, LeaseProfile: r.leaseProfile, ReleaseVersion: r.releaseVersion,
		ContentDigest: r.contentDigest, PropertySetDigest: r.propertySetDigest, ArtifactDigest: r.artifactDigest}
	// A release missing from createdBy leaves createdAt empty, which
	// Validate names (after the release's own fields).
	d := m.derived(ds, &t, subjects[subjectKey(t.SubjectKind, t.SubjectName)], profiles[t.LeaseProfile], created[t.ReleaseVersion])
	if r.extra != nil {
		r.extra.apply(&d)
	}
	d.Audience, d.LeaseProfile, d.PropertySetDigest = ds.one(d.Audience), ds.one(d.LeaseProfile), ds.one(d.PropertySetDigest)
	return d
}

// parsedRelease is a release as parseRelease reads it: the manifest, the
// root's shard entries and the createdAt of each release by version.
type parsedRelease struct {
	m       *Manifest
	refs    []ShardRef
	created map[int64]string
}

// parseRelease is ParseRelease; given, unless negative, is the number of
// shard files the caller has, which must be the number the root lists.
func parseRelease(root ReleaseFile, given int, shard func(k int, ref ShardRef) (ReleaseFile, error)) (*parsedRelease, error) {
	rootFile := root.Path
	var r rootDoc
	rootVal, err := decodeStrict(rootFile, root.Bytes, &r)
	if err != nil {
		return nil, fmt.Errorf("parse release manifest: %w", err)
	}
	refs, err := r.shardRefs()
	if err != nil {
		return nil, fmt.Errorf("parse release manifest %s: %w", rootFile, err)
	}
	if given >= 0 && given != len(refs) {
		return nil, fmt.Errorf("parse release manifest %s: %w: the root lists %d shards, %d were given", rootFile, ErrInvalidManifest, len(refs), given)
	}
	m := &Manifest{
		ReleaseHeader: r.ReleaseHeader, Inputs: r.Inputs, LeaseProfiles: r.LeaseProfiles,
		Subjects: []Subject{}, Workflows: []WorkflowVersion{}, WorkflowLedger: []LedgerEntry{}, Targets: []TargetEntry{},
		ReleaseDigest: r.ReleaseDigest,
	}
	if m.Inputs == nil {
		m.Inputs = []Input{}
	}
	if m.LeaseProfiles == nil {
		m.LeaseProfiles = []LeaseProfile{}
	}
	bad := func(err error) (*parsedRelease, error) {
		return nil, fmt.Errorf("parse release manifest %s: %w", rootFile, err)
	}
	created := map[int64]string{m.ReleaseVersion: m.CreatedAt}
	for n, row := range r.CreatedBy {
		var t releaseTime
		if err := decodeRow("createdBy", n, row, nil, &t.ReleaseVersion, &t.CreatedAt); err != nil {
			return bad(err)
		}
		if _, dup := created[t.ReleaseVersion]; dup {
			return bad(fmt.Errorf("%w: createdBy[%d]: release %d listed twice", ErrInvalidManifest, n, t.ReleaseVersion))
		}
		created[t.ReleaseVersion] = t.CreatedAt
	}
	for n, row := range r.Subjects {
		x, err := decodeSubject("subjects", n, row, "")
		if err != nil {
			return bad(err)
		}
		m.Subjects = append(m.Subjects, x)
	}
	for n, row := range r.Workflows {
		w, err := decodeWorkflow("workflows", n, row, "")
		if err != nil {
			return bad(err)
		}
		m.Workflows = append(m.Workflows, w)
	}
	for n, row := range r.WorkflowLedger {
		var e LedgerEntry
		if err := decodeRow("workflowLedger", n, row, nil, &e.WfDefID, &e.Version, &e.Digest, &e.PublishedIn); err != nil {
			return bad(err)
		}
		m.WorkflowLedger = append(m.WorkflowLedger, e)
	}
	// The shards are checked and decoded on every core, then joined in the
	// root's order (the first bad shard in that order is the error).
	shards := make([]*parsedShard, len(refs))
	err = parallel.Do(len(refs), func(k int) error {
		f, err := shard(k, refs[k])
		if err != nil {
			return err
		}
		shards[k], err = parseShard(m.ReleaseHeader, refs[k], f)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Every shard's subjects are known before its rows are made target
	// entries: the fields that follow from the release are derived from
	// them as each row is read.
	total := 0
	for k, sh := range shards {
		total += len(sh.targets)
		m.HostInputs = append(m.HostInputs, HostInputs{Host: refs[k].Host, Digest: sh.inputsDigest})
		m.Subjects = append(m.Subjects, sh.subjects...)
		m.Workflows = append(m.Workflows, sh.workflows...)
	}
	sort.Slice(m.Subjects, func(a, b int) bool {
		x, y := &m.Subjects[a], &m.Subjects[b]
		return x.Kind < y.Kind || x.Kind == y.Kind && x.Name < y.Name
	})
	sort.SliceStable(m.Workflows, func(a, b int) bool { return m.Workflows[a].Name < m.Workflows[b].Name })
	profiles, subjects := m.index()
	ds := newDerivedShared()
	m.Targets = make([]TargetEntry, 0, total)
	for k, sh := range shards {
		for n := range sh.targets {
			m.Targets = append(m.Targets, m.entryOf(ds, refs[k].Host, &sh.targets[n], created, profiles, subjects))
		}
		shards[k] = nil
	}
	if err := m.Validate(); err != nil {
		return bad(err)
	}
	// The root's createdBy lists exactly the earlier releases the targets
	// name.
	unused := maps.Clone(created)
	for k := range m.Targets {
		delete(unused, m.Targets[k].ReleaseVersion)
	}
	delete(unused, m.ReleaseVersion)
	for rv := range unused {
		return bad(fmt.Errorf("%w: createdBy lists release %d, which created none of the targets", ErrInvalidManifest, rv))
	}
	// releaseDigest: the root's content without it (the root records every
	// shard's digest, checked above against the shard's bytes).
	rootVal.Delete("releaseDigest")
	want, err := digestOf(rootVal)
	if err != nil {
		return nil, err
	}
	if r.ReleaseDigest != want {
		return bad(fmt.Errorf("%w: releaseDigest %s, content digests to %s", ErrDigestMismatch, r.ReleaseDigest, want))
	}
	return &parsedRelease{m: m, refs: refs, created: created}, nil
}

// parsedShard is one shard of a release, checked against the root and
// decoded, before the release is joined.
type parsedShard struct {
	inputsDigest string
	subjects     []Subject
	workflows    []WorkflowVersion
	targets      []targetRow
}

// targetRow is a target row of a shard as decoded: its columns and its
// trailing map (nil: none). The joined release makes a target entry of it,
// whose other fields follow from the release (Manifest.derived): the rows
// of every shard are held until then, in a third of the room of entries
// (160 bytes a row against 432).
type targetRow struct {
	serviceID, audience, subjectKind, subjectName, leaseProfile string
	releaseVersion                                              int64
	contentDigest, propertySetDigest, artifactDigest            string
	extra                                                       *targetExtra
}

// CRLFNote returns, when b has CRLF line endings and with LF ones would
// digest to want, a note saying so (" (the file has CRLF line endings; ...)"),
// and "" otherwise: a file converted by a tool (core.autocrlf=true, Git for
// Windows' default) on its way into a release archive. The compiler reads
// a checkout's release files as LF before they get here.
func CRLFNote(b []byte, want string) string {
	if !bytes.Contains(b, []byte("\r\n")) || render.BytesDigest(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))) != want {
		return ""
	}
	return " (the file has CRLF line endings; " + CRLFAdvice + ")"
}

// CRLFAdvice follows the files whose CRLF line endings explain a digest
// mismatch.
const CRLFAdvice = "a release file is digested with the LF line endings configpub writes"

// parseShard checks shard file f against the root's entry ref (path,
// digest, header, target count) and decodes its rows.
func parseShard(h ReleaseHeader, ref ShardRef, f ReleaseFile) (*parsedShard, error) {
	bad := func(err error) (*parsedShard, error) {
		return nil, fmt.Errorf("parse release manifest %s: %w", f.Path, err)
	}
	if want := ShardPath(h.EnvTag, ref.Host); f.Path != want {
		return nil, fmt.Errorf("parse release manifest: %w: the shard of %s is %s, want %s", ErrInvalidManifest, ref.Host, f.Path, want)
	}
	if got := render.BytesDigest(f.Bytes); got != ref.Digest {
		return bad(fmt.Errorf("%w: shard %s digests to %s, the root records %s%s", ErrDigestMismatch, f.Path, got, ref.Digest, CRLFNote(f.Bytes, ref.Digest)))
	}
	sd, ok := decodeShardRendered(f.Bytes)
	if !ok {
		sd = shardDoc{}
		if _, err := decodeStrict(f.Path, f.Bytes, &sd); err != nil {
			return nil, fmt.Errorf("parse release manifest: %w", err)
		}
	}
	if sd.APIVersion != h.APIVersion || sd.Kind != ShardKind || sd.EnvTag != h.EnvTag || sd.Host != ref.Host {
		return bad(fmt.Errorf("%w: %s/%s of %s host %s, want %s/%s of %s host %s", ErrInvalidManifest,
			sd.APIVersion, sd.Kind, sd.EnvTag, sd.Host, h.APIVersion, ShardKind, h.EnvTag, ref.Host))
	}
	if !digest.Valid(sd.InputsDigest) {
		return bad(fmt.Errorf("%w: inputsDigest %q is not sha256:<64 hex>", ErrInvalidManifest, sd.InputsDigest))
	}
	if int64(len(sd.Targets)) != ref.Targets {
		return bad(fmt.Errorf("%w: %d targets, the root records %d", ErrInvalidManifest, len(sd.Targets), ref.Targets))
	}
	sh := &parsedShard{inputsDigest: sd.InputsDigest, targets: make([]targetRow, 0, len(sd.Targets))}
	for n, row := range sd.Subjects {
		x, err := decodeSubject("subjects", n, row, ref.Host)
		if err != nil {
			return bad(err)
		}
		sh.subjects = append(sh.subjects, x)
	}
	for n, row := range sd.Workflows {
		w, err := decodeWorkflow("workflows", n, row, ref.Host)
		if err != nil {
			return bad(err)
		}
		sh.workflows = append(sh.workflows, w)
	}
	for n, row := range sd.Targets {
		var extra targetExtra
		var subj string
		var t targetRow
		if err := decodeRow("targets", n, row, &extra, &t.serviceID, &t.audience, &subj, &t.leaseProfile, &t.releaseVersion,
			&t.contentDigest, &t.propertySetDigest, &t.artifactDigest); err != nil {
			return bad(err)
		}
		var ok bool
		if t.subjectKind, t.subjectName, ok = splitSubject(subj); !ok {
			return bad(fmt.Errorf("%w: targets[%d]: subject %q is not Kind/name", ErrInvalidManifest, n, subj))
		}
		if len(row) > 8 {
			t.extra = &extra
		}
		sh.targets = append(sh.targets, t)
	}
	return sh, nil
}

// decodeSubject decodes row n of a subjects list of host ("" in the root).
func decodeSubject(list string, n int, row []json.RawMessage, host string) (Subject, error) {
	var key string
	var x Subject
	var extra struct {
		PolicySnapshotID *string `json:"policySnapshotId"`
	}
	if err := decodeRow(list, n, row, &extra, &key, &x.PolicyVersion, &x.PolicyDigest); err != nil {
		return x, err
	}
	var ok bool
	if x.Kind, x.Name, ok = splitSubject(key); !ok {
		return x, fmt.Errorf("%w: %s[%d]: subject %q is not Kind/name", ErrInvalidManifest, list, n, key)
	}
	x.PolicySnapshotID = PolicySnapshotID(x.Kind, x.Name, x.PolicyDigest)
	if extra.PolicySnapshotID != nil {
		x.PolicySnapshotID = *extra.PolicySnapshotID
	}
	x.Host = host
	return x, nil
}

// decodeWorkflow decodes row n of a workflows list of host ("" in the
// root).
func decodeWorkflow(list string, n int, row []json.RawMessage, host string) (WorkflowVersion, error) {
	w := WorkflowVersion{Host: host}
	err := decodeRow(list, n, row, nil, &w.Name, &w.WfDefID, &w.Version, &w.State, &w.Digest)
	return w, err
}

// clone returns a shallow copy whose ReleaseDigest can be set without
// touching m.
func (m *Manifest) clone() *Manifest { c := *m; return &c }
