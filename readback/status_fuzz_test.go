package readback_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/readback"
)

var (
	lowerUUID  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	reasonCode = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)
)

// FuzzReadStatus: whatever a runtime's status endpoint answers (an
// httptest server here), the collector accepts only one JSON document for
// the target's identity, and every receipt it derives is of the form the
// store records: a phase and result it knows (READY only for a
// candidate), lowercase UUIDs, reason codes, sha256 digests, RFC 3339
// times and no negative counts.
func FuzzReadStatus(f *testing.F) {
	good := bundle.RuntimeStatus{Type: bundle.RuntimeStatusType, Host: "h", ServiceID: "s", EnvTag: "prod", Audience: "agent",
		Current:       &bundle.SnapshotState{SnapshotID: "00000000-0000-8000-8000-000000000001", Result: bundle.ResultApplied, LoadedAt: "2026-11-29T12:00:00Z", ReleaseVersion: 2, Sequence: 9},
		LastKnownGood: &bundle.SnapshotState{SnapshotID: "00000000-0000-8000-8000-000000000002", Result: bundle.ResultApplied},
		LastRejected:  &bundle.SnapshotState{SnapshotID: "00000000-0000-8000-8000-000000000003", Result: bundle.ResultRejected, Reason: "DIGEST_MISMATCH", ArtifactDigest: digest.FromBytes([]byte("x")).String()},
		Candidate:     &bundle.SnapshotState{SnapshotID: "00000000-0000-8000-8000-000000000004", Result: bundle.ResultReady},
		LastLoad:      &bundle.LoadState{Outcome: "APPLIED", At: "2026-11-29T12:00:00Z"},
		ObservedAt:    "2026-11-29T12:00:01Z"}
	b, err := json.Marshal(good)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"type":"` + bundle.RuntimeStatusType + `","host":"h","serviceId":"s","envTag":"prod","audience":"agent","failedClosed":false,"observedAt":""}`))
	f.Add([]byte(`{"type":"` + bundle.RuntimeStatusType + `","host":"h","serviceId":"s","envTag":"prod","audience":"agent","candidate":{"snapshotId":"00000000-0000-8000-8000-000000000004","result":"APPLIED"}}`))

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	var mu sync.Mutex
	var answer []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(answer)
	}))
	f.Cleanup(srv.Close)
	col, err := readback.NewCollector(readback.Options{Signer: key})
	if err != nil {
		f.Fatal(err)
	}
	target := readback.Target{Endpoint: srv.URL, Host: "h", ServiceID: "s", EnvTag: "prod"}
	f.Fuzz(func(t *testing.T, body []byte) {
		mu.Lock()
		answer = body
		mu.Unlock()
		st, err := col.Read(context.Background(), target)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted %q, which is not one JSON value", body)
		}
		if st.Identity() != target.Identity() || bundle.Namespace(st.Audience) == "" {
			t.Fatalf("accepted a status for %v audience %q", st.Identity(), st.Audience)
		}
		for _, r := range st.Receipts(target.Endpoint) {
			switch {
			case r.Phase != bundle.PhaseCurrent && r.Phase != bundle.PhaseCandidate,
				r.Result != bundle.ResultApplied && r.Result != bundle.ResultReady && r.Result != bundle.ResultRejected,
				r.Result == bundle.ResultReady && r.Phase != bundle.PhaseCandidate,
				!lowerUUID.MatchString(r.SnapshotID),
				r.PublicationID != "" && !lowerUUID.MatchString(r.PublicationID),
				r.RunningSnapshotID != "" && !lowerUUID.MatchString(r.RunningSnapshotID),
				r.LastKnownGoodSnapshotID != "" && !lowerUUID.MatchString(r.LastKnownGoodSnapshotID),
				r.Reason != "" && !reasonCode.MatchString(r.Reason),
				r.ReleaseVersion < 0 || r.Sequence < 0:
				t.Fatalf("a receipt the store cannot record: %+v", r)
			}
			for _, d := range []string{r.ArtifactDigest, r.ContentDigest, r.PolicyDigest} {
				if d != "" && !digest.Valid(d) {
					t.Fatalf("receipt digest %q", d)
				}
			}
			if r.LoadedAt != "" {
				if _, err := time.Parse(time.RFC3339Nano, r.LoadedAt); err != nil {
					t.Fatalf("receipt loadedAt %q", r.LoadedAt)
				}
			}
		}
	})
}
