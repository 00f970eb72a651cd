package promoter

import (
	"fmt"
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
)

// timeLayout is how signed times are written: UTC, millisecond precision
// (RFC 3339).
const timeLayout = "2006-01-02T15:04:05.000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// pointerTarget is one target whose pointer is (re)issued: the snapshot's
// manifest fields, its lease window, and the signed result.
type pointerTarget struct {
	Host, ServiceID, Audience                   string
	SnapshotID, PublicationID, PolicySnapshotID string
	SnapshotRelease                             int64
	ArtifactDigest, ContentDigest               string
	PolicyDigest, PropertySetDigest             string
	SchemaVersion                               int
	CompatibilityGeneration, RevocationEpoch    int64
	RefreshMS, ExpiresMS                        int64

	Phase string // "" (current) or bundle.PhaseCandidate (a staged candidate)

	PrevSnapshot *string // current pointer before the move (nil = none)
	PrevSequence int64

	// Filled by sign (Sequence, IssuedAt and ActivatedAt set before).
	Sequence    int64
	ActivatedAt time.Time // the pointer move's time; kept by renewals and re-signs
	IssuedAt    time.Time
	RefreshAt   time.Time
	ExpiresAt   time.Time
	Manifest    []byte
	Signature   string
}

// manifest builds the delivery manifest for issuedAt.
func (p *pointerTarget) manifest(envTag string) *bundle.DeliveryManifest {
	return &bundle.DeliveryManifest{
		Type:                    bundle.DeliveryManifestType,
		Host:                    p.Host,
		ServiceID:               p.ServiceID,
		EnvTag:                  envTag,
		Audience:                p.Audience,
		SnapshotID:              p.SnapshotID,
		PublicationID:           p.PublicationID,
		PolicySnapshotID:        p.PolicySnapshotID,
		ReleaseVersion:          p.SnapshotRelease,
		ArtifactDigest:          p.ArtifactDigest,
		ContentDigest:           p.ContentDigest,
		PolicyDigest:            p.PolicyDigest,
		PropertySetDigest:       p.PropertySetDigest,
		SchemaVersion:           p.SchemaVersion,
		CompatibilityGeneration: p.CompatibilityGeneration,
		RevocationEpoch:         p.RevocationEpoch,
		Sequence:                p.Sequence,
		ActivatedAt:             formatTime(p.ActivatedAt),
		IssuedAt:                formatTime(p.IssuedAt),
		ValidFrom:               formatTime(p.IssuedAt),
		RefreshAfter:            formatTime(p.RefreshAt),
		ExpiresAt:               formatTime(p.ExpiresAt),
		Phase:                   p.Phase,
	}
}

// signAll fills Manifest and Signature of every target (Sequence and
// IssuedAt must be set), spreading the ECDSA work over SignWorkers
// goroutines.
func (s *Store) signAll(envTag string, ps []pointerTarget) error {
	if s.opts.Signer == nil {
		return ErrNoSigner
	}
	workers := s.opts.SignWorkers
	if workers > len(ps) {
		workers = len(ps)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	chunk := (len(ps) + workers - 1) / max(workers, 1)
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(ps))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func(part []pointerTarget) {
			defer wg.Done()
			for i := range part {
				if err := s.signOne(envTag, &part[i]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}(ps[lo:hi])
	}
	wg.Wait()
	return firstErr
}

func (s *Store) signOne(envTag string, p *pointerTarget) error {
	p.RefreshAt = p.IssuedAt.Add(time.Duration(p.RefreshMS) * time.Millisecond)
	p.ExpiresAt = p.IssuedAt.Add(time.Duration(p.ExpiresMS) * time.Millisecond)
	b, err := p.manifest(envTag).Marshal()
	if err != nil {
		return err
	}
	sig, err := signing.SignBlob(s.opts.Signer, b)
	if err != nil {
		return fmt.Errorf("sign delivery manifest %s/%s/%s: %w", p.Host, p.ServiceID, envTag, err)
	}
	p.Manifest, p.Signature = b, sig
	return nil
}
