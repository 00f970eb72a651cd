package configserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/client"
)

// fixedClock is the runtime client's clock, set inside the golden
// fixture's envelope validity window.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// TestRuntimeClientInterop serves a compiled golden target (its exact
// values.yml and the ids/digests of its target.json) and loads it with the
// runtime client of configserver/client: full verification (digests,
// envelope, manifest signature, lease), then a conditional reload (304) and
// an evidence report stored in runtime_evidence.
func TestRuntimeClientInterop(t *testing.T) {
	t.Parallel()
	values, tg := readGoldenAdvisor(t)
	issued := time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC) // inside the envelope's validity window
	// The server's clock (observedAt bounds of evidence) agrees with the runtime's.
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: func() time.Time { return issued.Add(time.Minute) }}})
	id := bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}
	sn := &snapshot{ID: tg.SnapshotID, PublicationID: tg.PublicationID, PolicySnapshotID: tg.PolicySnapshotID,
		Identity: id, Audience: tg.Audience, ReleaseVersion: tg.ReleaseVersion, ArtifactDigest: tg.ArtifactDigest,
		ContentDigest: tg.ContentDigest, PolicyDigest: tg.PolicyDigest, PropertySetDigest: tg.PropertySetDigest,
		CompatibilityGeneration: tg.CompatibilityGeneration, Body: values}
	if digestOf(values) != tg.ArtifactDigest {
		t.Fatalf("fixture: values.yml digest %s, target.json says %s", digestOf(values), tg.ArtifactDigest)
	}
	e.seed.insert(t, sn)
	e.seed.moveAt(t, sn, issued, 5*time.Minute, 15*time.Minute)
	waitServed(t, e, id, tg.Audience, sn.ID)

	tok := e.token(t, id, tg.Audience)
	c, err := client.New(client.Options{
		ServerURL:   e.srv.URL,
		Identity:    id,
		Audience:    tg.Audience,
		TokenSource: func(context.Context) (string, error) { return tok, nil },
		TrustedKeys: e.seed.trusted,
		Clock:       fixedClock{issued.Add(time.Minute)},
		CacheDir:    t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ev, err := c.Load(ctx)
	if err != nil {
		t.Fatalf("runtime client load: %v (evidence %+v)", err, ev)
	}
	if ev.Outcome != client.OutcomeApplied || ev.SnapshotID != sn.ID {
		t.Fatalf("got evidence %+v, want APPLIED %s", ev, sn.ID)
	}
	ev2, err := c.Load(ctx) // conditional: the server answers 304
	if err != nil {
		t.Fatalf("conditional reload: %v (evidence %+v)", err, ev2)
	}
	if err := c.ReportEvidence(ctx, ev); err != nil {
		t.Fatalf("report evidence: %v", err)
	}
	var outcome string
	if err := e.db.Pool(t).QueryRow(ctx, `SELECT outcome FROM configpub.runtime_evidence WHERE snapshot_id = $1`, sn.ID).Scan(&outcome); err != nil {
		t.Fatalf("evidence row: %v", err)
	}
	if outcome != "APPLIED" {
		t.Fatalf("stored outcome %q, want APPLIED", outcome)
	}
}
