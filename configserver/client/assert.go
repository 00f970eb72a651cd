package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/configpub/configpub/bundle"
)

// Publication-assertion refusal reasons: why a receiver refused a caller's
// signed delivery manifest presented as its publication assertion. Each is
// stable and distinct; see also ReasonPeerIdentityMissing,
// ReasonUnknownPublication and ReasonPolicyDigestMismatch (the accepted
// list).
const (
	// ReasonAssertionInvalid: the assertion headers are incomplete or
	// malformed, or the manifest is not a canonical delivery manifest of
	// the current phase (a candidate manifest is never an assertion).
	ReasonAssertionInvalid Reason = "PEER_ASSERTION_INVALID"
	// ReasonAssertionUntrustedKey: the key id names no key the receiver
	// trusts.
	ReasonAssertionUntrustedKey Reason = "PEER_ASSERTION_UNTRUSTED_KEY"
	// ReasonAssertionForged: the signature does not verify under the
	// trusted key it names.
	ReasonAssertionForged Reason = "PEER_ASSERTION_FORGED"
	// ReasonAssertionMismatch: the signed manifest names another
	// publication, policy snapshot or policy digest than the X-Policy-*
	// headers.
	ReasonAssertionMismatch Reason = "PEER_ASSERTION_MISMATCH"
	// ReasonPeerSubjectMismatch: the assertion is another runtime's (its
	// identity is not the authenticated caller's) or another environment's.
	ReasonPeerSubjectMismatch Reason = "PEER_SUBJECT_MISMATCH"
	// ReasonIncompatibleGeneration: the assertion's compatibilityGeneration
	// differs from the receiver's own.
	ReasonIncompatibleGeneration Reason = "PEER_INCOMPATIBLE_GENERATION"
	// ReasonAssertionExpired: the assertion's signed lease is over (or not
	// yet begun), with the receiver's skew.
	ReasonAssertionExpired Reason = "PEER_ASSERTION_EXPIRED"
	// ReasonAssertionStaleEpoch: the assertion's revocation epoch is lower
	// than the receiver's: it was signed before a revocation the receiver
	// already applies.
	ReasonAssertionStaleEpoch Reason = "PEER_ASSERTION_STALE_EPOCH"
	// ReasonCallerUnauthenticated: the receiver could not tell which
	// runtime is calling, so no assertion can be bound to it.
	ReasonCallerUnauthenticated Reason = "PEER_CALLER_UNAUTHENTICATED"
)

// Ways a peer was admitted (PeerVerdict.Via).
const (
	ViaAcceptedList = "accepted-list" // the publication is on the receiver's own accepted list
	ViaAssertion    = "assertion"     // the caller's signed delivery manifest verified
)

// CallerFunc returns the identity of the runtime calling r, as the receiver
// authenticated it (mTLS client certificate, workload JWT): never from a
// header the caller chooses freely.
type CallerFunc func(r *http.Request) (bundle.Identity, error)

// PeerOptions configures VerifyPeer and PeerMiddleware.
type PeerOptions struct {
	// Accepted extracts the receiver's accepted publications from its own
	// snapshot. nil means AcceptedFromProjection().
	Accepted AcceptedFunc
	// Caller authenticates the calling runtime. Required: an assertion is
	// accepted only for the caller's own identity (its subject).
	Caller CallerFunc
}

// PeerVerdict is an admitted call: the publication it carries, how it was
// admitted and, for an assertion, the caller's verified manifest.
type PeerVerdict struct {
	AcceptedPublication
	PolicySnapshotID string
	Via              string
	Manifest         *bundle.DeliveryManifest // ViaAssertion only
}

// VerifyPeer decides whether r's caller may call this runtime under the
// publication it names (X-Policy-Publication-Id, X-Policy-Snapshot-Id,
// X-Policy-Digest):
//
//   - a publication on the receiver's accepted list with exactly that
//     policy digest is admitted (CheckPeer); one on the list with another
//     digest is refused (POLICY_DIGEST_MISMATCH);
//   - a publication the list does not know is admitted only with a
//     publication assertion (X-Policy-Manifest,
//     X-Policy-Manifest-Signature, X-Policy-Manifest-Key-Id: the caller's
//     signed delivery manifest): the signature must verify under one of the
//     receiver's trusted keys, the manifest must name the headers'
//     publication, policy snapshot and digest, be the authenticated
//     caller's own (same identity: its subject) in the receiver's
//     environment, carry the receiver's compatibilityGeneration and a
//     revocation epoch not below the receiver's, and be inside its signed
//     lease. This admits a caller of a release the receiver does not know
//     yet (new→old); the accepted list, which names the previous release,
//     admits an older one (old→new). Without an assertion an unlisted
//     publication is UNKNOWN_PUBLICATION.
//
// A refusal is a *PeerError with one of the stable reasons; it matches
// ErrPublicationRejected. With no current snapshot of its own the receiver
// fails closed (ErrNoSnapshot or ErrExpired).
func (c *Client) VerifyPeer(r *http.Request, opts PeerOptions) (*PeerVerdict, error) {
	own, err := c.Current()
	if err != nil {
		return nil, err
	}
	h := r.Header
	pid, pd, psid := h.Get(HeaderPeerPublicationID), h.Get(HeaderPeerPolicyDigest), h.Get(HeaderPeerSnapshotID)
	refuse := func(reason Reason) (*PeerVerdict, error) {
		return nil, &PeerError{Reason: reason, PublicationID: pid, PolicyDigest: pd}
	}
	if !isUUID(pid) || !isDigest(pd) || !isUUID(psid) {
		return refuse(ReasonPeerIdentityMissing)
	}
	accepted := opts.Accepted
	if accepted == nil {
		accepted = AcceptedFromProjection()
	}
	list, err := accepted(own)
	if err != nil {
		return nil, fmt.Errorf("accepted publications: %w", err)
	}
	a, err := CheckPeer(h, list)
	if err == nil {
		return &PeerVerdict{AcceptedPublication: a, PolicySnapshotID: psid, Via: ViaAcceptedList}, nil
	}
	var pe *PeerError
	enc, sig, kid := h.Get(HeaderPeerManifest), h.Get(HeaderPeerManifestSignature), h.Get(HeaderPeerManifestKeyID)
	if !errors.As(err, &pe) || pe.Reason != ReasonUnknownPublication || (enc == "" && sig == "" && kid == "") {
		return nil, err // a known publication with another digest is forged whatever else is sent
	}
	if enc == "" || sig == "" || kid == "" || !isDigest(kid) || len(enc) > 16<<10 || len(sig) > 1<<10 {
		return refuse(ReasonAssertionInvalid)
	}
	mbytes, err := decodeManifest(enc)
	if err != nil {
		return refuse(ReasonAssertionInvalid)
	}
	m, err := c.verifyManifest(candidate{manifestBytes: mbytes, signature: sig, keyID: kid})
	if err != nil {
		switch r, _ := reasonOf(err); r {
		case ReasonUntrustedKey:
			return refuse(ReasonAssertionUntrustedKey)
		case ReasonSignatureInvalid:
			return refuse(ReasonAssertionForged)
		default:
			return refuse(ReasonAssertionInvalid)
		}
	}
	if m.IsCandidate() {
		// A candidate manifest vouches for a staged snapshot that no
		// runtime runs: never an assertion of what the caller runs.
		return refuse(ReasonAssertionInvalid)
	}
	if m.PublicationID != pid || m.PolicySnapshotID != psid || m.PolicyDigest != pd {
		return refuse(ReasonAssertionMismatch)
	}
	if opts.Caller == nil {
		return refuse(ReasonCallerUnauthenticated)
	}
	caller, err := opts.Caller(r)
	if err != nil {
		return refuse(ReasonCallerUnauthenticated)
	}
	if m.Identity() != caller || m.EnvTag != c.opts.Identity.EnvTag {
		return refuse(ReasonPeerSubjectMismatch)
	}
	if m.CompatibilityGeneration != own.Envelope.CompatibilityGeneration {
		return refuse(ReasonIncompatibleGeneration)
	}
	ownEpoch := own.Envelope.RevocationEpoch
	if own.Manifest != nil {
		ownEpoch = max(ownEpoch, own.Manifest.RevocationEpoch)
	}
	if m.RevocationEpoch < ownEpoch {
		return refuse(ReasonAssertionStaleEpoch)
	}
	lease, err := parseWindow("assertion", m.ValidFrom, m.RefreshAfter, m.ExpiresAt)
	if err != nil {
		return refuse(ReasonAssertionInvalid)
	}
	if err := c.checkWindow("assertion", lease, m.ValidFrom, m.ExpiresAt, c.opts.Clock.Now()); err != nil {
		return refuse(ReasonAssertionExpired)
	}
	return &PeerVerdict{AcceptedPublication: AcceptedPublication{PublicationID: pid, PolicyDigest: pd},
		PolicySnapshotID: psid, Via: ViaAssertion, Manifest: m}, nil
}

type verdictKey struct{}

// PeerVerdictFromContext returns the verdict PeerMiddleware admitted the
// request with.
func PeerVerdictFromContext(ctx context.Context) (*PeerVerdict, bool) {
	v, ok := ctx.Value(verdictKey{}).(*PeerVerdict)
	return v, ok
}

// PeerMiddleware admits a request only when VerifyPeer does: 503
// FAILED_CLOSED without a current snapshot of its own, 403 with the reason
// otherwise (JSON {"error", "reason"}, never more than the ids presented).
// The verdict is available to next through PeerVerdictFromContext (and the
// publication through PeerFromContext).
func (c *Client) PeerMiddleware(opts PeerOptions, next http.Handler) (http.Handler, error) {
	if opts.Caller == nil {
		return nil, errors.New("peer middleware: no Caller: an assertion must be bound to the authenticated caller")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := c.VerifyPeer(r, opts)
		if err != nil {
			var pe *PeerError
			switch {
			case errors.As(err, &pe):
				writePeerError(w, http.StatusForbidden, string(pe.Reason), err.Error())
			case errors.Is(err, ErrNoSnapshot) || errors.Is(err, ErrExpired):
				writePeerError(w, http.StatusServiceUnavailable, "FAILED_CLOSED", err.Error())
			default:
				writePeerError(w, http.StatusServiceUnavailable, "ACCEPTED_LIST_INVALID", err.Error())
			}
			return
		}
		ctx := context.WithValue(context.WithValue(r.Context(), verdictKey{}, v), peerKey{}, v.AcceptedPublication)
		next.ServeHTTP(w, r.WithContext(ctx))
	}), nil
}
