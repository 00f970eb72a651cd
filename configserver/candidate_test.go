package configserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/pointernote"
	"github.com/configpub/configpub/promoter"
)

// TestCandidatePhaseServesTheStagedSnapshot stages release 2 with the real
// promoter and reads it back through the real Config Server:
// configPhase=candidate serves release 2's snapshot (body and headers)
// while the current pointer stays on release 1; the identity boundary is
// the current pointer's (another identity's token is refused); a legacy
// phase value still selects the current pointer; once release 2 is activated there is no candidate (404).
func TestCandidatePhaseServesTheStagedSnapshot(t *testing.T) {
	t.Parallel()
	values, tg := readGoldenAdvisor(t)
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	ps, _ := e.openPromoter(t, func() time.Time { return goldenCreatedAt })
	id := bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}
	// The golden target as release `release` records it with another body.
	target := func(release int64, snapshotID string, body []byte) promoter.Target {
		pt := tg.promoterTarget(body)
		pt.SnapshotID, pt.PublicationID, pt.ReleaseVersion, pt.SourceEventSequence = snapshotID, bundle.PublicationID(tg.EnvTag, release), release, release
		pt.ArtifactDigest = digest.FromBytes(body).String()
		return pt
	}
	snap1, snap2 := uuid.NewString(), uuid.NewString()
	values2 := append(bytes.Clone(values), "# release 2\n"...)
	rel := func(v int64, snap string, body []byte) promoter.ReleaseInput {
		return promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: tg.EnvTag, ReleaseVersion: v, BaseReleaseVersion: v - 1,
			ManifestBytes: []byte("release manifest " + snap + "\n"), Actor: "configserver-test", Reason: "test",
			Targets: []promoter.Target{target(v, snap, body)}}
	}
	if _, err := ps.RecordAndActivate(ctx, rel(1, snap1, values)); err != nil {
		t.Fatal(err)
	}
	tok := e.token(t, id, tg.Audience)
	candidatePath := configsPath(id) + "&configPhase=candidate"
	if resp, _ := e.do(t, "GET", candidatePath, tok); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("candidate before staging: got %d, want 404", resp.StatusCode)
	}
	if _, err := ps.Stage(ctx, rel(2, snap2, values2)); err != nil {
		t.Fatal(err)
	}
	waitServed(t, e, id, tg.Audience, snap1)
	resp, body := e.do(t, "GET", candidatePath, tok)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Config-Snapshot-Id") != snap2 || !bytes.Equal(body, values2) {
		t.Fatalf("candidate: got %d snapshot %q (%d bytes), want 200 snapshot %s with release 2's bytes",
			resp.StatusCode, resp.Header.Get("X-Config-Snapshot-Id"), len(body), snap2)
	}
	if got := resp.Header.Get("X-Config-Release-Version"); got != "2" {
		t.Fatalf("candidate release version header %q, want 2", got)
	}
	if resp, _ := e.do(t, "GET", configsPath(id), tok); resp.Header.Get("X-Config-Snapshot-Id") != snap1 {
		t.Fatalf("current pointer after staging: %q, want release 1's %s", resp.Header.Get("X-Config-Snapshot-Id"), snap1)
	}
	other := bundle.Identity{Host: "other-host", ServiceID: id.ServiceID, EnvTag: id.EnvTag}
	if resp, _ := e.do(t, "GET", candidatePath, e.token(t, other, tg.Audience)); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("candidate with another identity's token: got %d, want 403", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", configsPath(id)+"&configPhase=runtime", tok); resp.Header.Get("X-Config-Snapshot-Id") != snap1 {
		t.Fatalf("legacy configPhase=runtime: got %d snapshot %q, want the current %s", resp.StatusCode, resp.Header.Get("X-Config-Snapshot-Id"), snap1)
	}
	if _, err := ps.ActivateRelease(ctx, promoter.MoveInput{CommandID: uuid.NewString(), EnvTag: tg.EnvTag, Release: 2, Actor: "a", Reason: "go"}, promoter.ActivateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitServed(t, e, id, tg.Audience, snap2)
	if resp, _ := e.do(t, "GET", candidatePath, tok); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("candidate after activation: got %d, want 404", resp.StatusCode)
	}
}

// TestCandidateManifestNeverServedAsCurrent: a candidate manifest stored
// under a current pointer (which the promoter never writes) is an
// integrity error on the server too: 500, never served, the body saying
// nothing.
func TestCandidateManifestNeverServedAsCurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	owner := e.db.Pool(t)
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("candidate-as-current"))
	ps := e.seed.move(t, sn)
	tok := e.token(t, idA, "agent")
	waitServed(t, e, idA, "agent", sn.ID)
	cand := *ps.Parsed
	cand.Phase = bundle.PhaseCandidate
	raw, err := cand.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `UPDATE configpub.current_pointer SET manifest = $1 WHERE host = $2 AND service_id = $3`,
		raw, idA.Host, idA.ServiceID); err != nil {
		t.Fatal(err)
	}
	moved, _ := json.Marshal(pointernote.Note{Host: idA.Host, ServiceID: idA.ServiceID, EnvTag: idA.EnvTag})
	if _, err := owner.Exec(ctx, pointernote.SendSQL, string(moved)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, e, configsPath(idA), tok, http.StatusInternalServerError)
	if _, body := e.do(t, "GET", configsPath(idA), tok); bytes.Contains(body, []byte("candidate-as-current")) || bytes.Contains(body, []byte("phase")) {
		t.Fatalf("500 body %q reveals stored data", body)
	}
}
