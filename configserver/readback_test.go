package configserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
)

// TestWorkloadTokenCannotCreateAReceiptReadbackRecordsOne: on a real
// promoter, database and Config Server, a runtime reports APPLIED with its
// workload token (and tries to call it a receipt): it is stored as an
// observation only and status has no receipt. Then the collector reads the
// runtime's status endpoint with the control-plane key and records a
// receipt naming the runtime's current and last-known-good snapshot; status
// and history show it apart from the observation, and only the receipt
// acknowledges the move (STATE APPLIED); a second readback of the
// same state adds nothing; a runtime answering for another identity is
// refused and records nothing.
func TestWorkloadTokenCannotCreateAReceiptReadbackRecordsOne(t *testing.T) {
	t.Parallel()
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	g := activateGolden(t, clock, promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute})
	ctx := context.Background()
	c := g.client(t, g.e.srv.URL, t.TempDir())
	clock.Set(clock.Now().Add(time.Second))
	ev, err := c.Load(ctx)
	if err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("load: %v (%+v)", err, ev)
	}

	// The workload token: an observation, never a receipt.
	if err := c.ReportEvidence(ctx, ev); err != nil {
		t.Fatalf("report: %v", err)
	}
	tok := g.e.token(t, g.id, g.aud)
	body := `{"host":"` + g.id.Host + `","serviceId":"` + g.id.ServiceID + `","envTag":"` + g.id.EnvTag +
		`","audience":"` + g.aud + `","outcome":"APPLIED","reason":"NEW_SNAPSHOT","snapshotId":"` + g.target.SnapshotID +
		`","observedAt":"` + clock.Now().Format(time.RFC3339) + `","kind":"receipt"}`
	ereq, _ := http.NewRequest(http.MethodPost, g.e.srv.URL+"/configs/evidence", strings.NewReader(body))
	ereq.Header.Set("Authorization", "Bearer "+tok)
	ereq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(ereq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("evidence claiming kind receipt: got %d, want 400", resp.StatusCode)
	}
	st := targetStatus(t, g)
	if st.LastEvidence == nil || st.LastEvidence.Kind != "observation" || st.LastReceipt != nil {
		t.Fatalf("after a workload report: got last evidence %+v, last receipt %+v; want an observation and no receipt", st.LastEvidence, st.LastReceipt)
	}
	if st.State != promoter.TargetPublished || st.Running != nil || st.AcknowledgedAt != nil ||
		st.LastObservation == nil || st.LastObservation.Outcome != bundle.ResultApplied {
		t.Fatalf("after a workload report: got state %s running %+v acknowledged %v observation %+v; want PUBLISHED, unacknowledged, the APPLIED observation shown apart",
			st.State, st.Running, st.AcknowledgedAt, st.LastObservation)
	}

	col, store, target := g.readbackOf(t, c)

	// A workload token does not open the status endpoint either.
	req, _ := http.NewRequest(http.MethodGet, target.Endpoint+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status endpoint with a workload token: got %v %v, want 401", r.StatusCode, err)
	}

	clock.Set(clock.Now().Add(2 * time.Second))
	res, err := readback.Run(ctx, col, store, []readback.Target{target})
	if err != nil || len(res) != 1 || res[0].Recorded != 1 {
		t.Fatalf("readback: got %+v, %v; want one receipt recorded", res, err)
	}
	st = targetStatus(t, g)
	r := st.LastReceipt
	if r == nil || r.Kind != "receipt" || r.Phase != bundle.PhaseCurrent || r.Outcome != bundle.ResultApplied ||
		r.SnapshotID != g.target.SnapshotID || r.RunningSnapshotID != g.target.SnapshotID ||
		r.LastKnownGoodSnapshotID != g.target.SnapshotID || r.PublicationID != g.target.PublicationID ||
		r.Endpoint != target.Endpoint || r.LoadedAt == nil {
		t.Fatalf("status receipt: got %+v, want an APPLIED receipt running and keeping %s read from %s", r, g.target.SnapshotID, target.Endpoint)
	}
	if st.LastEvidence == nil || st.LastEvidence.Kind != "receipt" {
		t.Fatalf("last evidence: got %+v, want the receipt", st.LastEvidence)
	}
	if st.State != promoter.TargetApplied || st.Running == nil || st.Running.SnapshotID != g.target.SnapshotID ||
		st.AcknowledgedAt == nil || !st.AcknowledgedAt.Equal(r.ReportedAt) || st.LastObservation == nil {
		t.Fatalf("after the readback: got state %s running %+v acknowledged %v; want APPLIED running %s, acknowledged by the receipt",
			st.State, st.Running, st.AcknowledgedAt, g.target.SnapshotID)
	}
	moves, err := g.ps.History(ctx, g.id.EnvTag, promoter.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 1 || moves[0].ReceiptAt == nil || moves[0].AppliedAt == nil || !moves[0].AppliedAt.Equal(*moves[0].ReceiptAt) {
		t.Fatalf("history: got %+v, want appliedAt and receiptAt from the receipt (not the earlier observation)", moves)
	}

	// Reading the same state again records nothing new.
	if res, err := readback.Run(ctx, col, store, []readback.Target{target}); err != nil || res[0].Recorded != 0 {
		t.Fatalf("second readback: got %+v, %v; want nothing new recorded", res, err)
	}
	// A runtime answering for another identity is refused.
	other := target
	other.ServiceID = "com.networknt.agent-other-1.0.0"
	res, err = readback.Run(ctx, col, store, []readback.Target{other})
	if err == nil || !strings.Contains(res[0].Error, "CONTROL_TOKEN_AUDIENCE") {
		t.Fatalf("readback of a runtime of another identity: got %+v, %v; want a refusal (audience)", res, err)
	}
	// A snapshot of another identity is not recorded as this one's receipt.
	_, err = store.Record(ctx, bundle.Receipt{Host: g.id.Host, ServiceID: "com.networknt.agent-other-1.0.0", EnvTag: g.id.EnvTag,
		Audience: g.aud, Phase: bundle.PhaseCurrent, Result: bundle.ResultApplied, SnapshotID: g.target.SnapshotID}, time.Time{})
	if !errors.Is(err, readback.ErrInvalidReceipt) {
		t.Fatalf("receipt for another identity's snapshot: got %v, want ErrInvalidReceipt", err)
	}
}

// readbackOf serves c's status endpoint for the test's life and returns a
// collector with a fresh control key it trusts, the promoter's receipt
// store and the readback target of the endpoint.
func (g *goldenRuntime) readbackOf(t *testing.T, c *client.Client) (*readback.Collector, *readback.Store, readback.Target) {
	t.Helper()
	ctlKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ctlTrusted, err := signing.NewTrustedKey(&ctlKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.StatusHandler(client.StatusOptions{ControlKeys: []signing.TrustedKey{ctlTrusted}})
	if err != nil {
		t.Fatal(err)
	}
	rt := httptest.NewServer(h)
	t.Cleanup(rt.Close)
	col, err := readback.NewCollector(readback.Options{Signer: ctlKey, Now: g.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	store := readback.NewStore(g.e.db.PoolURL(t, g.e.db.URLFor(t, "configpub_promoter")))
	return col, store, readback.Target{Endpoint: rt.URL, Host: g.id.Host, ServiceID: g.id.ServiceID, EnvTag: g.id.EnvTag}
}

func targetStatus(t *testing.T, g *goldenRuntime) promoter.TargetStatus {
	t.Helper()
	st, err := g.ps.Status(context.Background(), g.id.EnvTag)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Targets) != 1 {
		t.Fatalf("got %d targets, want 1", len(st.Targets))
	}
	return st.Targets[0]
}
