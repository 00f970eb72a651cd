package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/configpub/configpub/bundle"
)

// Outcome is what a load did.
type Outcome string

// Outcomes.
const (
	// OutcomeApplied: a verified snapshot (or a renewed lease) became current.
	OutcomeApplied Outcome = bundle.OutcomeApplied
	// OutcomeUnchanged: the current snapshot is still the one served (304 or
	// the same bytes and manifest); nothing changed.
	OutcomeUnchanged Outcome = "UNCHANGED"
	// OutcomeRejected: something was received and failed verification;
	// nothing was applied, the last-known-good is kept.
	OutcomeRejected Outcome = bundle.OutcomeRejected
	// OutcomeUnavailable: nothing usable was received (network error, 401,
	// 403, 404, 5xx); the last-known-good is kept.
	OutcomeUnavailable Outcome = "UNAVAILABLE"
)

// Evidence records one load: its outcome with a stable reason, the candidate
// it concerned (snapshot id and digests, when they could be read) and the
// snapshot the runtime runs afterwards. It never holds a body or a token.
type Evidence struct {
	Outcome Outcome `json:"outcome"`
	Reason  Reason  `json:"reason"`
	Field   string  `json:"field,omitempty"`  // header or field that failed
	Detail  string  `json:"detail,omitempty"` // values involved (digest pairs, ids)
	Source  Source  `json:"source"`

	Host      string `json:"host"`
	ServiceID string `json:"serviceId"`
	EnvTag    string `json:"envTag"`
	Audience  string `json:"audience"`

	SnapshotID     string `json:"snapshotId,omitempty"`
	PublicationID  string `json:"publicationId,omitempty"`
	ReleaseVersion int64  `json:"releaseVersion,omitempty"`
	Sequence       int64  `json:"sequence,omitempty"`
	ArtifactDigest string `json:"artifactDigest,omitempty"`
	ContentDigest  string `json:"contentDigest,omitempty"`
	PolicyDigest   string `json:"policyDigest,omitempty"`
	LeaseExpiresAt string `json:"leaseExpiresAt,omitempty"`

	// CurrentSnapshotID is the snapshot in force after this load ("" when
	// none); FailedClosed is true when there is none or its lease expired.
	CurrentSnapshotID string `json:"currentSnapshotId,omitempty"`
	// LastKnownGoodSnapshotID is the snapshot persisted as last-known-good
	// after this load (without a CacheDir: the one held in memory).
	LastKnownGoodSnapshotID string `json:"lastKnownGoodSnapshotId,omitempty"`
	FailedClosed            bool   `json:"failedClosed"`
	// CacheError is set when an applied snapshot could not be persisted as
	// last-known-good (it is applied in memory regardless), or when a lease
	// renewal of the snapshot held was applied without persisting the seen
	// state, which it did not need (the seen-state file already held its
	// sequence and revocation epoch).
	CacheError string `json:"cacheError,omitempty"`

	ObservedAt time.Time `json:"observedAt"`
}

func (c *Client) newEvidence(src Source, now time.Time) *Evidence {
	id := c.opts.Identity
	return &Evidence{
		Source: src, Host: id.Host, ServiceID: id.ServiceID, EnvTag: id.EnvTag,
		Audience: c.opts.Audience, ObservedAt: now.UTC(),
	}
}

func (ev *Evidence) fromEnvelope(env *bundle.RuntimePolicy) {
	ev.PublicationID = env.PublicationID
	ev.ReleaseVersion = env.ReleaseVersion
	ev.ContentDigest = env.ContentDigest
	ev.PolicyDigest = env.PolicyDigest
}

func (ev *Evidence) fromManifest(m *bundle.DeliveryManifest) {
	ev.SnapshotID = m.SnapshotID
	ev.PublicationID = m.PublicationID
	ev.ReleaseVersion = m.ReleaseVersion
	ev.Sequence = m.Sequence
	ev.ContentDigest = m.ContentDigest
	ev.PolicyDigest = m.PolicyDigest
	ev.LeaseExpiresAt = m.ExpiresAt
}

func (ev *Evidence) fromSnapshot(s *Snapshot) {
	ev.SnapshotID = s.SnapshotID
	ev.PublicationID = s.PublicationID
	ev.ReleaseVersion = s.Envelope.ReleaseVersion
	ev.ArtifactDigest = s.ArtifactDigest
	ev.ContentDigest = s.ContentDigest
	ev.PolicyDigest = s.PolicyDigest
	ev.LeaseExpiresAt = s.ExpiresAt.UTC().Format(time.RFC3339)
	if s.Manifest != nil {
		ev.Sequence = s.Manifest.Sequence
		ev.LeaseExpiresAt = s.Manifest.ExpiresAt
	}
}

// fail records err (a *VerificationError or *UnavailableError) in ev.
func (ev *Evidence) fail(err error) {
	var ve *VerificationError
	var ue *UnavailableError
	switch {
	case errors.As(err, &ve):
		ev.Outcome, ev.Reason, ev.Field = OutcomeRejected, ve.Reason, ve.Field
		ev.Detail = ve.Detail
		if ve.Err != nil {
			if ev.Detail != "" {
				ev.Detail += ": "
			}
			ev.Detail += ve.Err.Error()
		}
	case errors.As(err, &ue):
		ev.Outcome, ev.Reason = OutcomeUnavailable, ue.Reason
		ev.Detail = ue.Error()
	default:
		ev.Outcome, ev.Reason, ev.Detail = OutcomeUnavailable, ReasonUnreachable, err.Error()
	}
}

// MaxEvidenceBytes bounds a POST /configs/evidence body (api contract).
const MaxEvidenceBytes = bundle.MaxEvidenceBytes

// ReportEvidence sends ev to the Config Server (POST /configs/evidence) under
// the client's own identity, for `configpub status`: the snapshot the load was
// about with its publication, release and sequence, and the snapshots the
// runtime runs and keeps as last-known-good afterwards. The server stores it
// as an unverified observation. Only APPLIED and REJECTED outcomes are
// recorded; others return ErrNotReportable. Values the server could not store
// (a snapshot id that is not a UUID, a malformed digest) are left out rather
// than sent; a publication is sent only together with the signed snapshot id
// it belongs to.
func (c *Client) ReportEvidence(ctx context.Context, ev *Evidence) error {
	if ev == nil || (ev.Outcome != OutcomeApplied && ev.Outcome != OutcomeRejected) {
		var o Outcome
		if ev != nil {
			o = ev.Outcome
		}
		return fmt.Errorf("report evidence %q: %w", o, ErrNotReportable)
	}
	if c.opts.ServerURL == "" {
		return errors.New("report evidence: no server URL configured")
	}
	id := c.opts.Identity
	r := bundle.EvidenceReport{
		Host: id.Host, ServiceID: id.ServiceID, EnvTag: id.EnvTag, Audience: c.opts.Audience,
		Outcome: string(ev.Outcome), Reason: string(ev.Reason), ReleaseVersion: max(ev.ReleaseVersion, 0), Sequence: max(ev.Sequence, 0),
		ObservedAt: ev.ObservedAt.UTC().Format(time.RFC3339Nano),
	}
	for _, p := range []struct {
		dst *string
		v   string
	}{
		{&r.SnapshotID, ev.SnapshotID}, {&r.CurrentSnapshotID, ev.CurrentSnapshotID}, {&r.LastKnownGoodSnapshotID, ev.LastKnownGoodSnapshotID},
	} {
		if isUUID(p.v) {
			*p.dst = p.v
		}
	}
	if r.SnapshotID != "" && isUUID(ev.PublicationID) {
		r.PublicationID = ev.PublicationID
	}
	for _, p := range []struct {
		dst *string
		v   string
	}{
		{&r.ArtifactDigest, ev.ArtifactDigest}, {&r.ContentDigest, ev.ContentDigest}, {&r.PolicyDigest, ev.PolicyDigest},
	} {
		if isDigest(p.v) {
			*p.dst = p.v
		}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("report evidence: %w", err)
	}
	if len(body) > MaxEvidenceBytes {
		return fmt.Errorf("report evidence: body of %d bytes exceeds %d", len(body), MaxEvidenceBytes)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.ServerURL+"/configs/evidence", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("report evidence: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := c.authorize(ctx, req); err != nil {
		return fmt.Errorf("report evidence: %w", err)
	}
	resp, err := c.do(req)
	if err != nil {
		return fmt.Errorf("report evidence to %s: %w", c.opts.ServerURL, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("report evidence to %s: HTTP %d", c.opts.ServerURL, resp.StatusCode)
	}
	return nil
}
