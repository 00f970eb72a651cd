package configserver

import (
	"context"
	"net/http"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

// Configuration phases selected by the configPhase query parameter.
const (
	// PhaseCurrent (or no configPhase) selects the current pointer.
	PhaseCurrent = "current"
	// PhaseCandidate selects the candidate snapshot of the identity's
	// staged release, which a runtime prefetches and verifies before a
	// two-phase activation.
	PhaseCandidate = "candidate"
)

// CandidateStore is implemented by stores that serve staged candidates.
// Candidate returns the identity's snapshot in its newest staged release
// (ErrNotFound when none is staged), with the candidate delivery manifest
// the promoter signed for it when staging (or renewed since): phase
// "candidate" in the signed bytes, so a runtime never loads it as its
// current configuration and a prefetch accepts nothing else.
type CandidateStore interface {
	Candidate(ctx context.Context, id bundle.Identity) (*Delivery, error)
}

// requestedPhase returns the configPhase of a raw query: candidate, or
// current for anything else (no configPhase, "current", and the legacy
// values older runtimes send, which never selected anything).
func requestedPhase(rawQuery string) string {
	phase := ""
	for _, v := range queryValues(rawQuery, "configPhase") {
		phase = v
	}
	if phase == PhaseCandidate {
		return PhaseCandidate
	}
	return PhaseCurrent
}

// serveCandidate answers GET|HEAD /configs?configPhase=candidate for an
// identity already checked against the token: the same identity boundary
// and wire contract as the current pointer.
func (h *handler) serveCandidate(w http.ResponseWriter, r *http.Request, rl *reqLog, claims *auth.Claims, id bundle.Identity) *httpError {
	cs, ok := h.store.(CandidateStore)
	if !ok {
		return errNotFound()
	}
	ctx, cancel := h.storeContext(r)
	defer cancel()
	d, err := cs.Candidate(ctx, id)
	if err != nil {
		return storeError(err)
	}
	return h.writeDelivery(w, r, rl, claims, d)
}
