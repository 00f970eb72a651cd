package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// ErrPinRevoked is returned by Pinned.Snapshot once the pinned snapshot is
// known to be revoked and the session's OnRevoke is DenyOnRevoke.
var ErrPinRevoked = errors.New("pinned configuration revoked: pinned work ends")

// ReasonPinMismatch: a re-hydrated snapshot is not the one the pin names.
const ReasonPinMismatch Reason = "PIN_MISMATCH"

// OnRevoke says what pinned work does once its snapshot is revoked.
type OnRevoke int

const (
	// DenyOnRevoke ends pinned work as soon as the revocation is known: the
	// default.
	DenyOnRevoke OnRevoke = iota
	// AllowUntilLeaseEnds lets pinned work finish under the revoked snapshot
	// until the lease of its last verified delivery manifest (plus skew)
	// ends, and no longer.
	AllowUntilLeaseEnds
)

func (o OnRevoke) String() string {
	if o == AllowUntilLeaseEnds {
		return "allow-until-lease-ends"
	}
	return "deny"
}

// answerState is the server's last word on the runtime's current snapshot
// from the runtime's own loads (GET /configs): refused (403, 404 or 410:
// the server no longer serves it as current — what a revocation does), or
// served under a verified manifest (refused 0). gen counts the answers, so
// that a session acts on each once.
type answerState struct {
	mu                         sync.Mutex
	gen                        uint64
	refused                    int
	snapshotID, artifactDigest string
}

// note records an answer about s.
func (a *answerState) note(s *Snapshot, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gen++
	a.refused, a.snapshotID, a.artifactDigest = refused, s.SnapshotID, s.ArtifactDigest
}

// last returns the last answer and its number.
func (a *answerState) last() (gen uint64, refused int, snapshotID, artifactDigest string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gen, a.refused, a.snapshotID, a.artifactDigest
}

// refusedStatus reports whether err is the server's refusal to serve the
// identity's current snapshot (403, 404 or 410), and which.
func refusedStatus(err error) (int, bool) {
	var ue *UnavailableError
	if errors.As(err, &ue) && (ue.Status == http.StatusForbidden || ue.Status == http.StatusNotFound || ue.Status == http.StatusGone) {
		return ue.Status, true
	}
	return 0, false
}

// Pin names the snapshot a session or long-running operation started
// under: what it records so that, after a restart, Rehydrate can bring the
// same verified policy back by id.
type Pin struct {
	SnapshotID       string `json:"snapshotId"`
	PolicySnapshotID string `json:"policySnapshotId"`
	PolicyDigest     string `json:"policyDigest"`
	PublicationID    string `json:"publicationId"`
	ContentDigest    string `json:"contentDigest"`
	ArtifactDigest   string `json:"artifactDigest"`
}

func pinOf(s *Snapshot) Pin {
	return Pin{SnapshotID: s.SnapshotID, PolicySnapshotID: s.Envelope.PolicySnapshotID, PolicyDigest: s.PolicyDigest,
		PublicationID: s.PublicationID, ContentDigest: s.ContentDigest, ArtifactDigest: s.ArtifactDigest}
}

// PinOptions configures a pinned session. The zero value denies on
// revocation.
type PinOptions struct {
	OnRevoke OnRevoke
}

// Pinned is a session pinned to one verified snapshot: newer snapshots the
// Client loads select the policy for new work only; Snapshot keeps
// answering with the pinned one until its lease ends or, per OnRevoke, it
// is revoked. It is safe for concurrent use.
type Pinned struct {
	c    *Client
	opts PinOptions
	pin  Pin

	mu      sync.Mutex
	snap    *Snapshot
	revoked string // why the pinned snapshot is known revoked; "" while it is not
	// byLoad is true when revoked comes from the runtime's own load (the
	// server refused the pinned snapshot as current), which a later
	// verified manifest for it clears.
	byLoad bool
	// answerGen is the number of the last server answer about the current
	// snapshot the session has acted on.
	answerGen uint64
}

// Pin pins the current snapshot for work starting now. It fails closed
// (ErrNoSnapshot, ErrExpired) when there is no current snapshot.
func (c *Client) Pin(opts PinOptions) (*Pinned, error) {
	s, err := c.Current()
	if err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	gen, _, _, _ := c.answer.last()
	return &Pinned{c: c, opts: opts, pin: pinOf(s), snap: s, answerGen: gen}, nil
}

// Pin returns what identifies the pinned snapshot; persist it with the
// session to re-hydrate it after a restart.
func (p *Pinned) Pin() Pin { return p.pin }

// Snapshot returns the pinned snapshot. It fails closed with ErrExpired
// once the lease of its last verified manifest (plus skew) has ended — a
// renewal the Client loads while the pinned snapshot is current (and not
// known revoked) is that manifest too — and
// with ErrPinRevoked once it is known revoked (by Check, or by a current
// snapshot of another id whose signed revocation epoch is above the pinned
// one's; the pinned snapshot itself re-signed with a raised epoch stands)
// unless OnRevoke is AllowUntilLeaseEnds. While the pinned snapshot is the
// runtime's current one, the runtime's own loads carry its revocation too:
// a load refused 403, 404 or 410 (the server no longer serves it as
// current, which is what a revocation does; unsigned, so a pin fails safe)
// marks it revoked at the next renewal the runtime asks for, and a later
// load that verifies a manifest for it clears that mark, as in Check. A
// revocation is not persisted: a restarted runtime learns it again from
// Rehydrate or Check.
func (p *Pinned) Snapshot() (*Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The server's last answer about the runtime's current snapshot, when
	// it is the pinned one and new to the session: a verified manifest
	// clears a mark an earlier refusal left, before the renewals the
	// runtime took are followed below; a refusal marks it after them.
	gen, refused, sid, ad := p.c.answer.last()
	answered := gen != p.answerGen && sid == p.pin.SnapshotID && ad == p.pin.ArtifactDigest
	p.answerGen = gen
	if answered && refused == 0 && p.byLoad {
		p.revoked, p.byLoad = "", false
	}
	if p.revoked == "" {
		if cur := p.c.current(); cur != nil && cur.Manifest != nil && p.snap.Manifest != nil &&
			cur.Manifest.RevocationEpoch > p.snap.Manifest.RevocationEpoch {
			if cur.SnapshotID == p.pin.SnapshotID && cur.ArtifactDigest == p.pin.ArtifactDigest {
				// The pinned snapshot is the current one, re-signed with the
				// raised epoch (revoke --epoch re-signs every current
				// pointer): it stands, under its newer manifest and lease.
				p.snap = cur
			} else {
				p.revoked = fmt.Sprintf("revocation epoch raised to %d above the pinned %d",
					cur.Manifest.RevocationEpoch, p.snap.Manifest.RevocationEpoch)
			}
		} else if cur != nil && cur.Manifest != nil && cur.SnapshotID == p.pin.SnapshotID &&
			cur.ArtifactDigest == p.pin.ArtifactDigest && cur.ExpiresAt.After(p.snap.ExpiresAt) {
			// The pinned snapshot is still current and its lease was
			// renewed (a verified manifest the Client loaded): the session
			// goes on under it, as the runtime's current snapshot does.
			p.snap = cur
		}
	}
	if answered && refused != 0 && p.revoked == "" {
		p.revoked, p.byLoad = fmt.Sprintf("the server no longer serves it as the current snapshot (%d)", refused), true
	}
	if p.revoked != "" && p.opts.OnRevoke == DenyOnRevoke {
		return nil, fmt.Errorf("snapshot %s: %s: %w", p.pin.SnapshotID, p.revoked, ErrPinRevoked)
	}
	if now := p.c.opts.Clock.Now(); !now.Before(p.snap.ExpiresAt.Add(p.c.opts.Skew)) {
		return nil, fmt.Errorf("pinned snapshot %s expired at %s: %w", p.pin.SnapshotID,
			p.snap.ExpiresAt.UTC().Format(time.RFC3339), ErrExpired)
	}
	return p.snap, nil
}

// Revoked reports why the pinned snapshot is known revoked ("" when not).
func (p *Pinned) Revoked() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.revoked
}

// Check asks the Config Server for the pinned snapshot again
// (GET /configs/snapshots/{id}), verified as in Rehydrate. A refusal of the
// snapshot (403, 404 or 410: the server no longer serves it to this
// identity, which is what a revocation does) or a signed revocation epoch
// above the pinned one marks it revoked; a renewed lease is taken. Any
// other failure (unreachable, a response that fails verification) changes
// nothing and is returned. A refusal is unsigned — a token of the wrong
// identity draws a 403 too, and a proxy can answer anything — so a later
// Check answered with the snapshot under a verified manifest (whose epoch
// is not below any seen) clears the mark it left: the signed answer wins.
// An answer whose manifest is older, by (sequence, issuedAt), than the one
// the session holds (a lagging replica's) changes nothing: the held lease
// is never replaced by an older one.
func (p *Pinned) Check(ctx context.Context) error {
	snap, err := p.c.fetchPinned(ctx, p.pin)
	p.mu.Lock()
	defer p.mu.Unlock()
	var ue *UnavailableError
	var ve *VerificationError
	switch {
	case err == nil && olderManifest(snap, p.snap):
		// A replica behind the one that signed the manifest held (a
		// lagging standby behind a load balancer): its older manifest
		// says nothing the session does not know, and its shorter lease
		// must not replace the held one. A mark stays as it was.
		return nil
	case err == nil:
		p.snap, p.revoked, p.byLoad = snap, "", false
		return nil
	case errors.As(err, &ue) && (ue.Status == http.StatusForbidden || ue.Status == http.StatusNotFound || ue.Status == http.StatusGone):
		p.revoked, p.byLoad = fmt.Sprintf("the server no longer serves it (%d)", ue.Status), false
		return nil
	case errors.As(err, &ve) && ve.Reason == ReasonRevocationRegression:
		p.revoked, p.byLoad = "revocation epoch raised above the pinned one", false
		return nil
	}
	return fmt.Errorf("check pinned snapshot %s: %w", p.pin.SnapshotID, err)
}

// olderManifest reports whether a's delivery manifest is below b's in the
// (sequence, issuedAt) order of the replay rule.
func olderManifest(a, b *Snapshot) bool {
	if a.Manifest == nil || b.Manifest == nil {
		return false
	}
	if a.Manifest.Sequence != b.Manifest.Sequence {
		return a.Manifest.Sequence < b.Manifest.Sequence
	}
	ai, aerr := parseTime("manifest.issuedAt", a.Manifest.IssuedAt)
	bi, berr := parseTime("manifest.issuedAt", b.Manifest.IssuedAt)
	return aerr == nil && berr == nil && ai.Before(bi)
}

// Rehydrate brings pinned work back after a restart: it fetches the
// snapshot pin names (GET /configs/snapshots/{id}, under the same token
// and identity as Load) and applies every check of a load — the manifest
// signature with a trusted key, identity and audience, the lease, the
// revocation epoch against the highest seen (so a snapshot revoked by
// epoch is refused), every digest before parsing, the strict parse, the
// envelope and contentDigest — and then requires the snapshot to be
// exactly the pinned one (PIN_MISMATCH otherwise). A historical manifest
// is older than the current one by nature, so its sequence is not held
// against the seen state, and nothing is made current or persisted.
func (c *Client) Rehydrate(ctx context.Context, pin Pin, opts PinOptions) (*Pinned, error) {
	snap, err := c.fetchPinned(ctx, pin)
	if err != nil {
		return nil, fmt.Errorf("rehydrate snapshot %s: %w", pin.SnapshotID, err)
	}
	gen, _, _, _ := c.answer.last()
	return &Pinned{c: c, opts: opts, pin: pin, snap: snap, answerGen: gen}, nil
}

// fetchPinned fetches and verifies the snapshot pin names.
func (c *Client) fetchPinned(ctx context.Context, pin Pin) (*Snapshot, error) {
	if !isUUID(pin.SnapshotID) {
		return nil, reject(ReasonPinMismatch, "snapshotId", "%q is not a lowercase UUID", pin.SnapshotID)
	}
	if c.opts.ServerURL == "" {
		return nil, &UnavailableError{Reason: ReasonUnreachable, Err: errors.New("no server URL configured")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.opts.ServerURL+"/configs/snapshots/"+pin.SnapshotID, nil)
	if err != nil {
		return nil, &UnavailableError{Reason: ReasonUnreachable, Err: err}
	}
	req.Header.Set("Accept", "application/yaml")
	if err := c.authorize(ctx, req); err != nil {
		return nil, &UnavailableError{Reason: ReasonTokenUnavailable, Err: err}
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, statusError(resp.StatusCode)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ensureSeen(); err != nil {
		return nil, err
	}
	now := c.opts.Clock.Now()
	ev := c.newEvidence(SourceServer, now) // collects what is learned; not reported
	floor := seenState{RevocationEpoch: c.seen.floor().RevocationEpoch}
	v, err := c.verifyResponse(ctx, resp, now, floor, "", ev)
	if err != nil {
		return nil, c.clockSkew(err, dateOf(resp.Header), now)
	}
	if got := pinOf(v.snap); got != pin {
		return nil, reject(ReasonPinMismatch, "snapshot", "served %+v, pinned %+v", got, pin)
	}
	v.snap.Source = SourceServer
	return v.snap, nil
}
