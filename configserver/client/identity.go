package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// RoundTripper returns an http.RoundTripper that stamps every outgoing
// request with the current snapshot's publication identity
// (X-Policy-Publication-Id, X-Policy-Snapshot-Id = runtimePolicy.policySnapshotId,
// X-Policy-Digest) and, when the snapshot came with a signed delivery
// manifest, with that manifest as its publication assertion
// (X-Policy-Manifest, X-Policy-Manifest-Signature, X-Policy-Manifest-Key-Id;
// see VerifyPeer). It fails closed: with no current, unexpired snapshot the
// request is not sent and the error matches ErrNoSnapshot or ErrExpired.
// base nil means http.DefaultTransport.
func (c *Client) RoundTripper(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &identityTransport{c: c, base: base}
}

type identityTransport struct {
	c    *Client
	base http.RoundTripper
}

func (t *identityTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s, err := t.c.Current()
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), err)
	}
	r := req.Clone(req.Context())
	r.Header.Set(HeaderPeerPublicationID, s.PublicationID)
	r.Header.Set(HeaderPeerSnapshotID, s.Envelope.PolicySnapshotID)
	r.Header.Set(HeaderPeerPolicyDigest, s.PolicyDigest)
	if s.Manifest != nil { // the publication assertion: this runtime's signed delivery manifest
		r.Header.Set(HeaderPeerManifest, base64.RawURLEncoding.EncodeToString(s.ManifestBytes))
		r.Header.Set(HeaderPeerManifestSignature, s.Signature)
		r.Header.Set(HeaderPeerManifestKeyID, s.KeyID)
	}
	return t.base.RoundTrip(r)
}

// AcceptedPublication is one {publicationId, policyDigest} pair a receiver
// accepts from a bound Agent (current or previous release).
type AcceptedPublication struct {
	Agent         string `json:"agent,omitempty"` // the bound Agent, when the projection names it
	PublicationID string `json:"publicationId"`
	PolicyDigest  string `json:"policyDigest"`
}

// AcceptedFunc extracts the accepted publications from the receiver's own
// verified snapshot, so that the middleware does not depend on where the
// projection keeps them.
type AcceptedFunc func(s *Snapshot) ([]AcceptedPublication, error)

// AcceptedFromProjection returns the AcceptedFunc for the compiler's Gateway
// and Knowledge projections, which list, per bound Agent, the accepted
// publications of the current and previous release
// (fixtures/golden/*/*/*/values.yml):
//
//	gatewayPolicy:            # or knowledgePolicy
//	  acceptedPublications:
//	    - agent: advisor
//	      publications:
//	        - {publicationId: <uuid>, policyDigest: sha256:<hex>}   # current release
//	        - {publicationId: <uuid>, policyDigest: sha256:<hex>}   # previous release
//
// It is AcceptedPublicationsAt("acceptedPublications", "*", "publications").
func AcceptedFromProjection() AcceptedFunc {
	return AcceptedPublicationsAt("acceptedPublications", "*", "publications")
}

// AcceptedPublicationsAt returns an AcceptedFunc that walks path from the
// audience namespace. A "*" element visits every value of a mapping (the key
// names the Agent) or every element of a list (its "agent" or "name" field
// names the Agent).
// The value at the end of the path is a list of {publicationId,
// policyDigest} mappings. A path that is absent yields no accepted
// publications; a malformed entry is an error (the middleware then fails
// closed).
func AcceptedPublicationsAt(path ...string) AcceptedFunc {
	path = append([]string(nil), path...)
	return func(s *Snapshot) ([]AcceptedPublication, error) {
		var out []AcceptedPublication
		err := walkAccepted(s.Namespace, path, "", &out)
		return out, err
	}
}

func walkAccepted(v any, path []string, agent string, out *[]AcceptedPublication) error {
	if len(path) == 0 {
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("accepted publications of %q: want a list, got %T", agent, v)
		}
		for i, e := range list {
			m, _ := e.(map[string]any)
			pid, _ := m["publicationId"].(string)
			pd, _ := m["policyDigest"].(string)
			if !isUUID(pid) || !isDigest(pd) {
				return fmt.Errorf("accepted publications of %q [%d]: want {publicationId: <uuid>, policyDigest: sha256:<hex>}", agent, i)
			}
			*out = append(*out, AcceptedPublication{Agent: agent, PublicationID: pid, PolicyDigest: pd})
		}
		return nil
	}
	if path[0] == "*" {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if err := walkAccepted(e, path[1:], k, out); err != nil {
					return err
				}
			}
		case []any:
			for i, e := range x {
				name := strconv.Itoa(i)
				if m, ok := e.(map[string]any); ok {
					if n, ok := m["agent"].(string); ok {
						name = n
					} else if n, ok := m["name"].(string); ok {
						name = n
					}
				}
				if err := walkAccepted(e, path[1:], name, out); err != nil {
					return err
				}
			}
		}
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	next, ok := m[path[0]]
	if !ok {
		return nil
	}
	return walkAccepted(next, path[1:], agent, out)
}

// Peer rejection reasons.
const (
	ReasonPeerIdentityMissing  Reason = "PEER_IDENTITY_MISSING"  // no or malformed X-Policy-* headers
	ReasonUnknownPublication   Reason = "UNKNOWN_PUBLICATION"    // publicationId not accepted
	ReasonPolicyDigestMismatch Reason = "POLICY_DIGEST_MISMATCH" // known publicationId, other policyDigest: forged
)

// PeerError reports why an incoming call's publication identity was refused.
// It matches ErrPublicationRejected.
type PeerError struct {
	Reason        Reason
	PublicationID string
	PolicyDigest  string
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("peer publication %s (%s): %s", e.PublicationID, e.PolicyDigest, e.Reason)
}

// Is makes every PeerError match ErrPublicationRejected.
func (e *PeerError) Is(target error) bool { return target == ErrPublicationRejected }

// CheckPeer checks an incoming call's X-Policy-* headers against accepted:
// the publicationId must be listed with exactly that policyDigest, and the
// policy snapshot id must be a well-formed UUID.
func CheckPeer(h http.Header, accepted []AcceptedPublication) (AcceptedPublication, error) {
	pid, pd, psid := h.Get(HeaderPeerPublicationID), h.Get(HeaderPeerPolicyDigest), h.Get(HeaderPeerSnapshotID)
	if !isUUID(pid) || !isDigest(pd) || !isUUID(psid) {
		return AcceptedPublication{}, &PeerError{Reason: ReasonPeerIdentityMissing, PublicationID: pid, PolicyDigest: pd}
	}
	known := false
	for _, a := range accepted {
		if a.PublicationID != pid {
			continue
		}
		known = true
		if a.PolicyDigest == pd {
			return a, nil
		}
	}
	if known {
		return AcceptedPublication{}, &PeerError{Reason: ReasonPolicyDigestMismatch, PublicationID: pid, PolicyDigest: pd}
	}
	return AcceptedPublication{}, &PeerError{Reason: ReasonUnknownPublication, PublicationID: pid, PolicyDigest: pd}
}

type peerKey struct{}

// PeerFromContext returns the accepted publication the middleware matched.
func PeerFromContext(ctx context.Context) (AcceptedPublication, bool) {
	a, ok := ctx.Value(peerKey{}).(AcceptedPublication)
	return a, ok
}

// Middleware admits a request only when this runtime holds a current,
// unexpired snapshot (else 503: fail closed) and the caller's publication
// identity is in the list accepted returns for it (else 403). Error bodies are
// JSON {"error", "reason"} and never echo more than the ids presented. The
// matched publication is available to next through PeerFromContext.
func (c *Client) Middleware(accepted AcceptedFunc, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := c.Current()
		if err != nil {
			writePeerError(w, http.StatusServiceUnavailable, "FAILED_CLOSED", err.Error())
			return
		}
		list, err := accepted(s)
		if err != nil {
			writePeerError(w, http.StatusServiceUnavailable, "ACCEPTED_LIST_INVALID", err.Error())
			return
		}
		a, err := CheckPeer(r.Header, list)
		if err != nil {
			var pe *PeerError
			reason := string(ReasonUnknownPublication)
			if errors.As(err, &pe) {
				reason = string(pe.Reason)
			}
			writePeerError(w, http.StatusForbidden, reason, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), peerKey{}, a)))
	})
}

func writePeerError(w http.ResponseWriter, status int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg, "reason": reason})
}
