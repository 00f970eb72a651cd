package configserver

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
)

// evidenceRequest is the JSON body of POST /configs/evidence.
type evidenceRequest struct {
	Host           string `json:"host"`
	ServiceID      string `json:"serviceId"`
	EnvTag         string `json:"envTag"`
	Outcome        string `json:"outcome"`
	Reason         string `json:"reason"`
	SnapshotID     string `json:"snapshotId"`
	ArtifactDigest string `json:"artifactDigest"`
	ContentDigest  string `json:"contentDigest"`
	PolicyDigest   string `json:"policyDigest"`
	ObservedAt     string `json:"observedAt"`
}

const maxReasonLen = 1024

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// serveEvidence answers POST /configs/evidence: a runtime reports, for its
// own identity only, that it applied or rejected a snapshot.
func (h *handler) serveEvidence(w http.ResponseWriter, r *http.Request, rl *reqLog) *httpError {
	if r.Method != http.MethodPost {
		return errMethod("POST")
	}
	claims, herr := h.authenticate(r, rl)
	if herr != nil {
		return herr
	}
	if r.ContentLength > h.maxEvidenceBytes {
		return errTooLarge(h.maxEvidenceBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxEvidenceBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge(h.maxEvidenceBytes)
		}
		return errBadRequest("request body could not be read")
	}
	var req evidenceRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return errBadRequest("evidence body is not a JSON object of the documented fields")
	}
	ev, herr := req.validate()
	if herr != nil {
		return herr
	}
	if ev.Identity != claims.Identity() {
		return errForbidden("evidence identity differs from the token's")
	}
	rl.snapshotID = ev.SnapshotID
	ctx, cancel := h.storeContext(r)
	defer cancel()
	if err := h.store.RecordEvidence(ctx, ev); err != nil {
		return storeError(err)
	}
	w.Header()["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (req *evidenceRequest) validate() (*Evidence, *httpError) {
	if req.Host == "" || req.ServiceID == "" || req.EnvTag == "" {
		return nil, errBadRequest("evidence fields host, serviceId and envTag are required")
	}
	if req.Outcome != "APPLIED" && req.Outcome != "REJECTED" {
		return nil, errBadRequest("evidence field outcome must be APPLIED or REJECTED")
	}
	if len(req.Reason) > maxReasonLen {
		return nil, errBadRequest("evidence field reason is longer than 1024 bytes")
	}
	ev := &Evidence{
		Identity: bundle.Identity{Host: req.Host, ServiceID: req.ServiceID, EnvTag: req.EnvTag},
		Outcome:  req.Outcome,
		Reason:   req.Reason,
	}
	if req.SnapshotID != "" {
		u, err := uuid.Parse(req.SnapshotID)
		if err != nil || len(req.SnapshotID) != 36 {
			return nil, errBadRequest("evidence field snapshotId is not a UUID")
		}
		ev.SnapshotID = u.String()
	}
	for _, f := range []struct {
		name string
		val  string
		dst  *string
	}{
		{"artifactDigest", req.ArtifactDigest, &ev.ArtifactDigest},
		{"contentDigest", req.ContentDigest, &ev.ContentDigest},
		{"policyDigest", req.PolicyDigest, &ev.PolicyDigest},
	} {
		if f.val != "" && !digestRE.MatchString(f.val) {
			return nil, errBadRequest("evidence field " + f.name + " is not sha256:<64 hex>")
		}
		*f.dst = f.val
	}
	if req.ObservedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, req.ObservedAt)
		if err != nil {
			return nil, errBadRequest("evidence field observedAt is not RFC 3339")
		}
		ev.ObservedAt = t
	}
	return ev, nil
}

func errTooLarge(limit int64) *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, code: "too_large",
		message: "evidence body larger than " + itoa(int(limit)) + " bytes", reason: "body too large"}
}
