package compiler

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
)

// renderBufs are the byte buffers of targets whose rendered bytes are
// hashed and let go (a ManifestOnly compile keeps only the entries): one
// host's worker renders target after target into the same buffers instead
// of allocating the property set, namespace and values.yml bytes of each
// (≈ 19 KB a target, an eighth of what a compile allocates).
type renderBufs struct{ propSet, ns, values []byte }

// canonicalInto returns the RFC 8785 form of v, rendered into *buf (and
// kept there for the next use) when buf is not nil.
func canonicalInto(buf *[]byte, v *render.Value) ([]byte, error) {
	if buf == nil {
		return render.Canonical(v)
	}
	b, err := render.AppendCanonical((*buf)[:0], v)
	*buf = b
	return b, err
}

// yamlInto returns the configpub-yaml/1 rendering of doc, rendered into
// *buf when buf is not nil.
func yamlInto(buf *[]byte, doc *render.Value) ([]byte, error) {
	if buf == nil {
		return render.YAML(doc)
	}
	b, err := render.AppendYAML((*buf)[:0], doc)
	*buf = b
	return b, err
}

// compileTarget settles one target: settings, projection, digests, the
// change decision against its entry in the base release (b, nil for
// none), envelope, rendering and validation. accepted is nil for Agent
// targets. With bufs, out's Values,
// PropertySet and Namespace are bufs' bytes, valid until the next target
// rendered into them.
func (c *compilation) compileTarget(t *envTarget, b *bundle.TargetEntry, accepted map[string][]bundle.Publication, out *Target, entry *bundle.TargetEntry, bufs *renderBufs) error {
	m := c.m
	sp := &t.e.spec
	aud := sp.Audience
	p := t.policy
	subj := t.subj
	id := sp.Host + "/" + sp.ServiceID + "/" + c.env
	var propBuf, nsBuf, valuesBuf *[]byte
	if bufs != nil {
		propBuf, nsBuf, valuesBuf = &bufs.propSet, &bufs.ns, &bufs.values
	}

	// Settings: environment settings for the audience, then the target's.
	if err := checkOverrideSpelling(c.envDoc.src, []string{"spec", "settings", aud}, c.envDoc.spec.Settings[aud], t.e.src, []string{"spec", "settings"}, sp.Settings); err != nil {
		return err
	}
	flat := flatten(mergeSettings(c.envDoc.spec.Settings[aud], sp.Settings))
	propSet, err := canonicalInto(propBuf, flat)
	if err != nil {
		return t.e.src.errorf([]string{"spec", "settings"}, "%v", err)
	}
	propDigest := render.BytesDigest(propSet)

	// Projection through the audience allowlist, plus delivery identities.
	ns := c.proj[aud].project(p.Tree)
	var inv, tombs []bundle.InventoryItem
	switch aud {
	case bundle.AudienceGateway:
		ns.Add("acceptedPublications", acceptedValue(boundAgents(p.Tree.Get("agents"), "name"), accepted))
	case bundle.AudienceKnowledge:
		ns.Add("acceptedPublications", acceptedValue(boundAgents(p.Tree.Get("bindings"), "agent"), accepted))
		if inv, err = inventory(p); err != nil {
			return err
		}
		tombs = tombstones(b, inv)
		iv := render.Map().Add("items", inventoryValue(inv)).Add("tombstones", inventoryValue(tombs))
		d, err := render.Digest(iv)
		if err != nil {
			return err
		}
		ns.Add("inventory", iv.Add("digest", render.String(d)))
	}
	nsBytes, err := canonicalInto(nsBuf, ns)
	if err != nil {
		return err
	}
	contentDigest := render.BytesDigest(nsBytes)

	spec := &m.repo.spec
	same := b != nil && b.Audience == aud && b.SubjectKind == sp.Subject.Kind && b.SubjectName == sp.Subject.Name &&
		b.PolicyDigest == p.Digest && b.ContentDigest == contentDigest && b.PropertySetDigest == propDigest &&
		b.LeaseProfile == sp.LeaseProfile && b.LeaseProfileDigest == t.pdigest &&
		b.PolicySnapshotID == subj.PolicySnapshotID && b.PolicyVersion == subj.PolicyVersion &&
		b.CompatibilityGeneration == spec.CompatibilityGeneration && b.RevocationEpoch == spec.RevocationEpoch &&
		b.SchemaVersion == bundle.SchemaVersion
	if same && !c.createdAt.IsZero() {
		// The envelope window is the snapshot's activation window: carry
		// the snapshot over only while it contains this release's
		// createdAt and its renewal time (the profile's renewBefore and
		// renewSpread) is still to come; else re-issue it as a snapshot
		// of this release.
		if reason := outsideWindow(b, c.createdAt, t.renew); reason != "" {
			same = false
			c.mu.Lock()
			c.reissued = append(c.reissued, Reissue{Host: sp.Host, ServiceID: sp.ServiceID, Reason: reason})
			c.mu.Unlock()
		}
	}

	var env bundle.RuntimePolicy
	if same {
		*entry = *b
		env = b.Envelope(c.env)
	} else {
		if err := c.newEntry(t, b, subj, contentDigest, propDigest, entry); err != nil {
			return err
		}
		env = entry.Envelope(c.env)
	}
	entry.Inventory, entry.Tombstones = inv, tombs

	doc := artifactTree(&env, bundle.Namespace(aud), ns, flat)
	values, err := yamlInto(valuesBuf, doc)
	if err != nil {
		return err
	}
	artifactDigest := render.BytesDigest(values)
	if same && artifactDigest != b.ArtifactDigest {
		// Same content, different bytes (renderer drift): a new snapshot.
		same = false
		if err := c.newEntry(t, b, subj, contentDigest, propDigest, entry); err != nil {
			return err
		}
		entry.Inventory, entry.Tombstones = inv, tombs
		env = entry.Envelope(c.env)
		doc = artifactTree(&env, bundle.Namespace(aud), ns, flat)
		if values, err = yamlInto(valuesBuf, doc); err != nil {
			return err
		}
		artifactDigest = render.BytesDigest(values)
	}
	if err := c.val.check(id, aud, doc); err != nil {
		return err
	}
	entry.ArtifactDigest = artifactDigest
	entry.SnapshotID = bundle.SnapshotID(sp.Host, sp.ServiceID, c.env, artifactDigest)

	inputs := files{}
	c.addInputs(inputs, t, p)
	dr, _ := time.ParseDuration(t.profile.Delivery.RefreshAfter)
	de, _ := time.ParseDuration(t.profile.Delivery.ExpiresAfter)
	*out = Target{
		Host: sp.Host, ServiceID: sp.ServiceID, EnvTag: c.env, Audience: aud,
		SubjectKind: sp.Subject.Kind, SubjectName: sp.Subject.Name,
		SnapshotID: entry.SnapshotID, PublicationID: entry.PublicationID, PolicySnapshotID: entry.PolicySnapshotID,
		ReleaseVersion: entry.ReleaseVersion, PolicyVersion: entry.PolicyVersion,
		PolicyDigest: entry.PolicyDigest, ContentDigest: entry.ContentDigest,
		PropertySetDigest: entry.PropertySetDigest, ArtifactDigest: artifactDigest,
		Changed: !same, Envelope: env, LeaseProfile: sp.LeaseProfile,
		DeliveryLease: bundle.LeaseWindow{RefreshAfter: dr, ExpiresAfter: de},
		Values:        values, InputDigests: inputs, PropertySet: propSet, Namespace: nsBytes,
	}
	return nil
}

// newEntry starts a new snapshot of a target in the next release.
func (c *compilation) newEntry(t *envTarget, b *bundle.TargetEntry, subj *bundle.Subject, contentDigest, propDigest string, e *bundle.TargetEntry) error {
	if c.createdAt.IsZero() {
		return fmt.Errorf("compile %s: release %d: target %s/%s changed: %w", c.env, c.next, t.e.spec.Host, t.e.spec.ServiceID, ErrCreatedAtRequired)
	}
	sp := &t.e.spec
	w := c.window(sp.LeaseProfile, t.profile)
	spec := &c.m.repo.spec
	*e = bundle.TargetEntry{
		Host: sp.Host, ServiceID: sp.ServiceID, Audience: sp.Audience,
		SubjectKind: sp.Subject.Kind, SubjectName: sp.Subject.Name,
		LeaseProfile: sp.LeaseProfile, LeaseProfileDigest: t.pdigest,
		PublicationID:           w.publication,
		PolicySnapshotID:        subj.PolicySnapshotID,
		ReleaseVersion:          c.next,
		PolicyVersion:           subj.PolicyVersion,
		SourceEventSequence:     c.next,
		SchemaVersion:           bundle.SchemaVersion,
		RevocationEpoch:         spec.RevocationEpoch,
		CompatibilityGeneration: spec.CompatibilityGeneration,
		CreatedAt:               w.created,
		ValidFrom:               w.created,
		RefreshAfter:            w.refreshAfter,
		ExpiresAt:               w.expiresAt,
		DeliveryLease:           bundle.Lease{RefreshAfter: t.profile.Delivery.RefreshAfter, ExpiresAfter: t.profile.Delivery.ExpiresAfter},
		PolicyDigest:            subj.PolicyDigest,
		ContentDigest:           contentDigest,
		PropertySetDigest:       propDigest,
		Changed:                 true,
	}
	if b != nil && b.Audience == sp.Audience {
		e.Previous = &bundle.Publication{PublicationID: b.PublicationID, PolicyDigest: b.PolicyDigest}
	}
	return nil
}

// newWindow is the publication and activation window of a new snapshot of
// this release under one lease profile, formatted once per compilation
// (every new target of a large release shares the strings).
type newWindow struct {
	publication, created, refreshAfter, expiresAt string
}

func (c *compilation) window(name string, p leaseProfile) newWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.windows[name]; ok {
		return w
	}
	created := c.createdAt.UTC().Truncate(time.Second)
	valid, _ := time.ParseDuration(p.ValidFor)
	refresh, _ := time.ParseDuration(p.RefreshAfter)
	w := newWindow{publication: bundle.PublicationID(c.env, c.next), created: formatTime(created),
		refreshAfter: formatTime(created.Add(refresh)), expiresAt: formatTime(created.Add(valid))}
	if c.windows == nil {
		c.windows = map[string]newWindow{}
	}
	c.windows[name] = w
	return w
}

// boundAgents lists the distinct agent names of a policy list, sorted.
func boundAgents(list *render.Value, key string) []string {
	set := map[string]bool{}
	if list != nil {
		for _, it := range list.Items {
			set[it.Get(key).Str] = true
		}
	}
	return sortedKeys(set)
}

// tombstones returns the items of the base inventory that are gone. An
// unchanged inventory keeps the base release's tombstones, so a target that
// did not change keeps its bytes.
func tombstones(b *bundle.TargetEntry, cur []bundle.InventoryItem) []bundle.InventoryItem {
	out := []bundle.InventoryItem{}
	if b == nil {
		return out
	}
	if equalSlices(b.Inventory, cur) {
		return append(out, b.Tombstones...)
	}
	now := map[[2]string]bool{}
	for _, it := range cur {
		now[[2]string{it.Kind, it.ID}] = true
	}
	for _, it := range b.Inventory {
		if !now[[2]string{it.Kind, it.ID}] {
			out = append(out, it)
		}
	}
	return out
}

// outsideWindow returns why base snapshot b is re-issued by a release
// created at createdAt, or "" when it is carried over: its activation
// window has ended, or createdAt is at or after the window's renewal time
// under r (renewal.at). A createdAt before the window's validFrom (a
// release dated before its base) does not re-issue: the window has not
// run out.
func outsideWindow(b *bundle.TargetEntry, createdAt time.Time, r renewal) string {
	until, err := bundle.ParseTime(b.ExpiresAt)
	at := createdAt.UTC().Truncate(time.Second)
	if err != nil {
		return "re-issued: the activation window of release " + itoa64(b.ReleaseVersion) + "'s snapshot is unreadable"
	}
	if !at.Before(until) {
		return fmt.Sprintf("re-issued: release %d's snapshot could be activated until %s (lease profile %s), and this release is created at %s",
			b.ReleaseVersion, b.ExpiresAt, b.LeaseProfile, formatTime(at))
	}
	renewAt := r.at(until)
	if at.Before(renewAt) {
		return ""
	}
	if r.spread <= 0 {
		return fmt.Sprintf("re-issued: release %d's snapshot can be activated until %s, less than renewBefore %s (lease profile %s) after this release's createdAt %s",
			b.ReleaseVersion, b.ExpiresAt, r.beforeText, b.LeaseProfile, formatTime(at))
	}
	return fmt.Sprintf("re-issued: release %d's snapshot can be activated until %s, and this release's createdAt %s is at or after %s, "+
		"host %s's last renewal time (one every renewSpread %s) at least renewBefore %s before then (lease profile %s)",
		b.ReleaseVersion, b.ExpiresAt, formatTime(at), formatTime(renewAt), r.host, r.spreadText, orZero(r.beforeText), b.LeaseProfile)
}

// renewal is when a release re-issues an unchanged snapshot ahead of its
// activation window's end: renewBefore ahead of it, and with a
// renewSpread, at the host's last renewal time before that. A host's
// renewal times recur every renewSpread at its own offset (renewOffset),
// so the hosts whose windows end together — every host of the release
// that created them — are renewed on different days, and each host keeps
// its day: after a renewal its next window ends validFor later, and its
// next renewal falls on one of its renewal times again.
type renewal struct {
	before, spread, offset time.Duration
	beforeText, spreadText string // as written in the lease profile
	host                   string
}

// renewalOf is the renewal of the targets of host in environment envTag
// with lease profile p, whose durations are checked with the repository
// ("" is 0).
func renewalOf(p leaseProfile, envTag, host string) renewal {
	r := renewal{beforeText: p.RenewBefore, spreadText: p.RenewSpread, host: host}
	r.before, _ = time.ParseDuration(p.RenewBefore)
	r.spread, _ = time.ParseDuration(p.RenewSpread)
	r.spread = r.spread.Truncate(time.Second)
	r.offset = renewOffset(envTag, host, r.spread)
	return r
}

// at is when a window ending at until is renewed: renewBefore before
// until, or with a spread the last of the host's renewal times (offset
// plus a whole number of spreads after the Unix epoch) at or before that.
func (r renewal) at(until time.Time) time.Time {
	last := until.Add(-r.before)
	if r.spread <= 0 {
		return last
	}
	s := int64(r.spread / time.Second)
	since := last.Unix() - int64(r.offset/time.Second)
	return last.Add(-time.Duration(((since%s)+s)%s) * time.Second)
}

// renewOffset is host's offset among the renewal times of spread: a whole
// number of seconds in [0, spread), fixed by the SHA-256 of envTag and
// host and spread evenly over the interval across hosts. Every compile of
// the same sources derives the same offset.
func renewOffset(envTag, host string, spread time.Duration) time.Duration {
	secs := uint64(spread / time.Second)
	if secs == 0 {
		return 0
	}
	sum := sha256.Sum256([]byte("configpub renewSpread\x00" + envTag + "\x00" + host))
	// The top 64 bits of a uniform 64-bit value times secs: uniform over
	// [0, secs).
	hi, _ := bits.Mul64(binary.BigEndian.Uint64(sum[:8]), secs)
	return time.Duration(hi) * time.Second
}

// addInputs adds to in the files target t reads: its subject's policy p,
// its own document, the environment's and the repository's.
func (c *compilation) addInputs(in files, t *envTarget, p *policy) {
	in.merge(p.Files)
	in.add(t.e.src)
	in.add(c.envDoc.src)
	in.add(c.m.repo.src)
}
