package promoter

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/digest"
)

// LeaseWindow is a rolling delivery lease: offsets from a manifest's
// issuedAt. It is bundle.LeaseWindow, the type the compiler produces.
type LeaseWindow = bundle.LeaseWindow

// Target is one compiled target of a release: its immutable snapshot, the
// artifact bytes and the lease profile. Field meanings follow
// compiler.Target and bundle.RuntimePolicy.
type Target struct {
	Host, ServiceID, EnvTag, Audience string
	SubjectKind, SubjectName          string

	SnapshotID, PublicationID, PolicySnapshotID string // lowercase UUIDs
	ReleaseVersion                              int64  // the release that created the snapshot
	PolicyVersion                               int64

	PolicyDigest, ContentDigest, PropertySetDigest, ArtifactDigest string // "sha256:<hex>"

	SchemaVersion           int   // 0 = bundle.SchemaVersion
	CompatibilityGeneration int64 // envelope compatibilityGeneration
	RevocationEpoch         int64 // envelope revocationEpoch
	SourceEventSequence     int64
	CreatedAt               time.Time // the snapshot's createdAt (envelope)
	// ValidFrom and ExpiresAt are the envelope's activation window: a
	// pointer may be moved to the snapshot only at a time t with
	// ValidFrom <= t < ExpiresAt.
	ValidFrom, ExpiresAt time.Time

	Changed      bool // changed since the base release (informational)
	LeaseProfile string
	Lease        LeaseWindow
	InputDigests map[string]string // input path -> digest

	// OCI publication evidence (optional).
	OCIReference, OCIManifestDigest, OCISignature string

	MediaType string // of Values; "" = registry.ValuesArtifactType
	// Values is the exact values.yml bytes; sha256(Values) must equal
	// ArtifactDigest. Nil when the input's ArtifactsStored is set.
	Values []byte
}

// Identity returns the target's runtime identity.
func (t *Target) Identity() bundle.Identity {
	return bundle.Identity{Host: t.Host, ServiceID: t.ServiceID, EnvTag: t.EnvTag}
}

// ReleaseInput is everything RecordAndActivate records and activates.
type ReleaseInput struct {
	// CommandID is the command UUID (promote.CommandID(commit, env)).
	CommandID string
	EnvTag    string
	// ReleaseVersion is the new release; BaseReleaseVersion the release the
	// environment must currently have (0 = none): the compare-and-swap.
	ReleaseVersion, BaseReleaseVersion int64
	ManifestBytes                      []byte // exact bytes of releases/<env>.yaml
	ReleaseDigest                      string // digest of the release manifest as the compiler states it
	SourceCommit, SourceRef            string
	Actor                              string
	Reviewers                          []string
	Reason                             string
	Targets                            []Target
	// BreakGlassReason, when not empty, overrides a freeze window open
	// when the release is recorded and activated (`promote --break-glass
	// --reason`): the release and its pointer moves then journal
	// "break-glass in freeze window NAME: BreakGlassReason" instead of
	// Reason. Empty: a window open then refuses (*FreezeError). Stage and
	// Record journal a window open when they record the same way (they
	// refuse none). It is not part of the command: whether a window was
	// broken is decided when the command runs, so the same command re-run
	// once the window has closed replays.
	BreakGlassReason string
	// ArtifactsStored: the targets' artifacts were stored with
	// Store.StoreArtifacts beforehand, so the targets carry no Values; the
	// recording checks that every artifact is stored and references it.
	// A caller that streams a large release sets it and never holds every
	// artifact's bytes at once. It is not part of the command: the same
	// release recorded either way is the same command.
	ArtifactsStored bool
	// Rollout is the environment's rollout policy as compiled with the
	// release (activation mode, freeze windows, health gate), recorded
	// with it and never changed.
	Rollout bundle.Rollout
	// SourcesDigest is the digest of the policy sources the release was
	// compiled from (compiler.Result.SourcesDigest; "" unknown): equal to
	// its base's, the release is a renewal. It is a function of
	// ManifestBytes (the inputs the release records), so it is not part of
	// the command.
	SourcesDigest string
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

func checkUUID(field, s string) error {
	u, err := uuid.Parse(s)
	if err != nil || u.String() != s {
		return invalid(field, "%q is not a lowercase UUID", s)
	}
	return nil
}

func checkDigest(field, s string) error {
	if !digestRE.MatchString(s) {
		return invalid(field, "%q is not sha256:<64 hex>", s)
	}
	return nil
}

// validate checks the input without hashing artifact bytes (cheap; done
// before the replay check).
func (in *ReleaseInput) validate() error {
	if err := checkUUID("commandId", in.CommandID); err != nil {
		return err
	}
	if in.EnvTag == "" {
		return invalid("envTag", "empty")
	}
	if in.ReleaseVersion <= 0 || in.BaseReleaseVersion < 0 || in.BaseReleaseVersion >= in.ReleaseVersion {
		return invalid("releaseVersion", "release %d on base %d: want 0 <= base < release", in.ReleaseVersion, in.BaseReleaseVersion)
	}
	if len(in.ManifestBytes) == 0 {
		return invalid("manifestBytes", "empty")
	}
	if in.Actor == "" {
		return invalid("actor", "empty")
	}
	if in.SourcesDigest != "" {
		if err := checkDigest("sourcesDigest", in.SourcesDigest); err != nil {
			return err
		}
	}
	if len(in.Targets) == 0 {
		return invalid("targets", "a release needs at least one target")
	}
	seen := make(map[bundle.Identity]bool, len(in.Targets))
	snaps := make(map[string]bundle.Identity, len(in.Targets))
	for i := range in.Targets {
		t := &in.Targets[i]
		if err := t.validate(in.EnvTag, in.ReleaseVersion, in.ArtifactsStored); err != nil {
			return fmt.Errorf("target %d (%s): %w", i, t.Identity(), err)
		}
		if seen[t.Identity()] {
			return invalid("targets", "identity %s appears twice", t.Identity())
		}
		seen[t.Identity()] = true
		if other, dup := snaps[t.SnapshotID]; dup {
			return fmt.Errorf("snapshot %s is claimed by %s and %s: %w", t.SnapshotID, other, t.Identity(), ErrIdentityMismatch)
		}
		snaps[t.SnapshotID] = t.Identity()
	}
	return nil
}

func (t *Target) validate(env string, release int64, stored bool) error {
	if t.Host == "" || t.ServiceID == "" {
		return invalid("host/serviceId", "empty")
	}
	if t.EnvTag != env {
		return fmt.Errorf("envTag %q in a release of %q: %w", t.EnvTag, env, ErrIdentityMismatch)
	}
	if bundle.Namespace(t.Audience) == "" {
		return invalid("audience", "%q is not agent, gateway or knowledge", t.Audience)
	}
	for _, f := range []struct{ name, v string }{
		{"snapshotId", t.SnapshotID}, {"publicationId", t.PublicationID}, {"policySnapshotId", t.PolicySnapshotID},
	} {
		if err := checkUUID(f.name, f.v); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{
		{"policyDigest", t.PolicyDigest}, {"contentDigest", t.ContentDigest},
		{"propertySetDigest", t.PropertySetDigest}, {"artifactDigest", t.ArtifactDigest},
	} {
		if err := checkDigest(f.name, f.v); err != nil {
			return err
		}
	}
	if t.ReleaseVersion <= 0 || t.ReleaseVersion > release {
		return invalid("releaseVersion", "snapshot release %d in release %d", t.ReleaseVersion, release)
	}
	if t.Lease.RefreshAfter <= 0 || t.Lease.ExpiresAfter < t.Lease.RefreshAfter {
		return invalid("lease", "refreshAfter %s, expiresAfter %s: want 0 < refreshAfter <= expiresAfter", t.Lease.RefreshAfter, t.Lease.ExpiresAfter)
	}
	if t.Lease.RefreshAfter%time.Millisecond != 0 || t.Lease.ExpiresAfter%time.Millisecond != 0 {
		return invalid("lease", "windows must be whole milliseconds")
	}
	if t.CreatedAt.IsZero() {
		return invalid("createdAt", "zero")
	}
	if t.ValidFrom.IsZero() || t.ExpiresAt.IsZero() || !t.ValidFrom.Before(t.ExpiresAt) {
		return invalid("validFrom/expiresAt", "activation window %s..%s: want validFrom < expiresAt",
			formatTime(t.ValidFrom), formatTime(t.ExpiresAt))
	}
	switch {
	case stored && t.Values != nil:
		return invalid("values", "set although the input's artifacts are stored ahead (artifactsStored)")
	case !stored && len(t.Values) == 0:
		return invalid("values", "empty")
	}
	return nil
}

// verifyArtifacts checks sha256(Values) == ArtifactDigest for every target
// that carries its bytes (stored artifacts were checked by StoreArtifacts,
// and the table ties every digest to its bytes).
func (in *ReleaseInput) verifyArtifacts() error {
	if in.ArtifactsStored {
		return nil
	}
	for i := range in.Targets {
		t := &in.Targets[i]
		if got := digest.FromBytes(t.Values).String(); got != t.ArtifactDigest {
			return fmt.Errorf("target %s: values digest %s, artifactDigest %s: %w", t.Identity(), got, t.ArtifactDigest, ErrIntegrity)
		}
	}
	return nil
}

// hasher writes length-prefixed fields, so field boundaries cannot shift.
type hasher struct{ h hash.Hash }

func newHasher(kind string) *hasher {
	h := &hasher{h: sha256.New()}
	h.str("configpub/command/" + kind + "/v1")
	return h
}

func (h *hasher) str(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.h.Write(n[:])
	h.h.Write([]byte(s))
}

func (h *hasher) int(v int64) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(v))
	h.h.Write(n[:])
}

func (h *hasher) sum() string { return digest.FromSum([sha256.Size]byte(h.h.Sum(nil))).String() }

// commandHash is the hash of everything the command would write; the same
// command UUID with another hash is a conflict.
func (in *ReleaseInput) commandHash() string {
	h := newHasher("promote")
	h.str(in.EnvTag)
	h.int(in.ReleaseVersion)
	h.int(in.BaseReleaseVersion)
	sum := sha256.Sum256(in.ManifestBytes)
	h.str(hex.EncodeToString(sum[:]))
	h.str(in.ReleaseDigest)
	h.str(in.SourceCommit)
	h.str(in.SourceRef)
	h.str(in.Actor)
	h.str(strings.Join(in.Reviewers, "\x00"))
	h.str(in.Reason)
	if !in.Rollout.IsZero() {
		b, _ := json.Marshal(in.Rollout)
		h.str(string(b))
	}
	h.int(int64(len(in.Targets)))
	for i := range in.Targets {
		t := &in.Targets[i]
		for _, s := range []string{t.Host, t.ServiceID, t.EnvTag, t.Audience, t.SubjectKind, t.SubjectName,
			t.SnapshotID, t.PublicationID, t.PolicySnapshotID, t.PolicyDigest, t.ContentDigest,
			t.PropertySetDigest, t.ArtifactDigest, t.LeaseProfile, t.OCIReference, t.OCIManifestDigest,
			t.OCISignature, t.mediaType(), t.CreatedAt.UTC().Format(time.RFC3339Nano),
			t.ValidFrom.UTC().Format(time.RFC3339Nano), t.ExpiresAt.UTC().Format(time.RFC3339Nano)} {
			h.str(s)
		}
		for _, v := range []int64{t.ReleaseVersion, t.PolicyVersion, int64(t.schemaVersion()), t.CompatibilityGeneration,
			t.RevocationEpoch, t.SourceEventSequence, int64(t.Lease.RefreshAfter), int64(t.Lease.ExpiresAfter)} {
			h.int(v)
		}
		if t.Changed {
			h.int(1)
		} else {
			h.int(0)
		}
		keys := make([]string, 0, len(t.InputDigests))
		for k := range t.InputDigests {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h.int(int64(len(keys)))
		for _, k := range keys {
			h.str(k)
			h.str(t.InputDigests[k])
		}
	}
	return h.sum()
}

func (t *Target) mediaType() string { return mediaTypeOr(t.MediaType) }

func (t *Target) schemaVersion() int {
	if t.SchemaVersion == 0 {
		return bundle.SchemaVersion
	}
	return t.SchemaVersion
}
