package promoter

import (
	"context"
	"time"
)

// presigned holds delivery manifests signed speculatively while the intent
// transaction runs. The activation transaction reuses one only when the
// pointer it was built for is still exactly as read (same previous snapshot
// and sequence) and the manifest content equals what the store holds;
// anything else is signed afresh under the lock. Its issuedAt is the time
// signing began, a few seconds before the move commits, which only shortens
// the lease; it is never reused once older than maxPresignAge.
type presigned struct {
	byID     map[[2]string]pointerTarget // host, serviceId
	issuedAt time.Time
}

// maxPresignAge bounds how old a speculative manifest may be when used.
const maxPresignAge = 30 * time.Second

// maxPresign is the largest release whose manifests are signed
// speculatively: the speculative set is held in memory whole, so a larger
// release is signed batch by batch under the lock instead (bounded memory).
const maxPresign = 10000

// presign reads envTag's current pointers (without locking) and signs a
// manifest for every target whose pointer would move. Errors are not
// reported: the activation signs whatever is missing. A release of more
// than maxPresign targets is not presigned.
func (s *Store) presign(ctx context.Context, in *ReleaseInput) *presigned {
	if len(in.Targets) > maxPresign {
		return nil
	}
	var epoch int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT revocation_epoch FROM configpub.environment
		WHERE env_tag = $1), 0)`, in.EnvTag).Scan(&epoch); err != nil {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT host, service_id, snapshot_id::text, sequence, retired_at IS NOT NULL
		FROM configpub.current_pointer WHERE env_tag = $1`, in.EnvTag)
	if err != nil {
		return nil
	}
	type cur struct {
		snapshot string
		seq      int64
		retired  bool
	}
	current := make(map[[2]string]cur, len(in.Targets))
	for rows.Next() {
		var c cur
		var h, sv string
		if err := rows.Scan(&h, &sv, &c.snapshot, &c.seq, &c.retired); err != nil {
			rows.Close()
			return nil
		}
		current[[2]string{h, sv}] = c
	}
	rows.Close()
	if rows.Err() != nil {
		return nil
	}
	now := s.now()
	ps := make([]pointerTarget, 0, len(in.Targets))
	for i := range in.Targets {
		t := &in.Targets[i]
		if !t.ValidFrom.IsZero() && (now.Before(t.ValidFrom) || !now.Before(t.ExpiresAt)) {
			continue // refused under the lock
		}
		p := pointerFromTarget(t)
		p.RevocationEpoch = max(p.RevocationEpoch, epoch)
		if c, ok := current[[2]string{t.Host, t.ServiceID}]; ok {
			if c.snapshot == t.SnapshotID && !c.retired {
				continue
			}
			prev := c.snapshot
			p.PrevSnapshot, p.PrevSequence = &prev, c.seq
		}
		p.Sequence, p.IssuedAt, p.ActivatedAt = nextSequence(p.PrevSequence, now), now, now
		ps = append(ps, p)
	}
	if err := s.signAll(in.EnvTag, ps); err != nil {
		return nil
	}
	out := &presigned{byID: make(map[[2]string]pointerTarget, len(ps)), issuedAt: now}
	for _, p := range ps {
		out.byID[[2]string{p.Host, p.ServiceID}] = p
	}
	return out
}

func pointerFromTarget(t *Target) pointerTarget {
	return pointerTarget{
		Host: t.Host, ServiceID: t.ServiceID, Audience: t.Audience,
		SnapshotID: t.SnapshotID, PublicationID: t.PublicationID, PolicySnapshotID: t.PolicySnapshotID,
		SnapshotRelease: t.ReleaseVersion,
		ArtifactDigest:  t.ArtifactDigest, ContentDigest: t.ContentDigest,
		PolicyDigest: t.PolicyDigest, PropertySetDigest: t.PropertySetDigest,
		SchemaVersion:           t.schemaVersion(),
		CompatibilityGeneration: t.CompatibilityGeneration, RevocationEpoch: t.RevocationEpoch,
		RefreshMS: t.Lease.RefreshAfter.Milliseconds(), ExpiresMS: t.Lease.ExpiresAfter.Milliseconds(),
	}
}

// take copies the speculative signature into p when it was built from
// exactly p's content and previous pointer, and reports whether it did.
func (pre *presigned) take(p *pointerTarget, now time.Time) bool {
	if pre == nil || now.Sub(pre.issuedAt) > maxPresignAge || now.Before(pre.issuedAt) {
		return false
	}
	q, ok := pre.byID[[2]string{p.Host, p.ServiceID}]
	if !ok || q.Audience != p.Audience || q.SnapshotID != p.SnapshotID || q.PublicationID != p.PublicationID ||
		q.PolicySnapshotID != p.PolicySnapshotID || q.SnapshotRelease != p.SnapshotRelease ||
		q.ArtifactDigest != p.ArtifactDigest || q.ContentDigest != p.ContentDigest ||
		q.PolicyDigest != p.PolicyDigest || q.PropertySetDigest != p.PropertySetDigest ||
		q.SchemaVersion != p.SchemaVersion || q.CompatibilityGeneration != p.CompatibilityGeneration ||
		q.RevocationEpoch != p.RevocationEpoch || q.RefreshMS != p.RefreshMS || q.ExpiresMS != p.ExpiresMS ||
		q.PrevSequence != p.PrevSequence || (q.PrevSnapshot == nil) != (p.PrevSnapshot == nil) ||
		(q.PrevSnapshot != nil && *q.PrevSnapshot != *p.PrevSnapshot) {
		return false
	}
	p.Sequence, p.IssuedAt, p.ActivatedAt, p.RefreshAt, p.ExpiresAt = q.Sequence, q.IssuedAt, q.ActivatedAt, q.RefreshAt, q.ExpiresAt
	p.Manifest, p.Signature = q.Manifest, q.Signature
	return true
}
