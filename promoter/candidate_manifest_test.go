package promoter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
)

// storedCandidate is one candidate pointer's stored manifest, verified.
type storedCandidate struct {
	m         *bundle.DeliveryManifest
	expiresAt time.Time
}

// candidateManifests reads, verifies (signature with the fixture's key,
// strict parse) and returns the stored candidate manifests of env/release
// by "host/serviceId".
func (f *fixture) candidateManifests(t testing.TB, env string, release int64) map[string]storedCandidate {
	t.Helper()
	trusted, err := signing.NewTrustedKey(&f.key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(context.Background(), `SELECT host || '/' || service_id, snapshot_id::text, manifest,
			manifest_signature, manifest_key_id, lease_expires_at, sequence
		FROM configpub.candidate_pointer WHERE env_tag = $1 AND release_version = $2`, env, release)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]storedCandidate{}
	for rows.Next() {
		var ident, snap, sig, kid string
		var raw []byte
		var exp time.Time
		var seq int64
		if err := rows.Scan(&ident, &snap, &raw, &sig, &kid, &exp, &seq); err != nil {
			t.Fatalf("candidate pointer without a complete manifest: %v", err)
		}
		if _, err := signing.VerifyBlob([]signing.TrustedKey{trusted}, raw, sig, kid); err != nil {
			t.Fatalf("%s: candidate manifest signature: %v", ident, err)
		}
		m, err := bundle.ParseDeliveryManifest(raw)
		if err != nil {
			t.Fatalf("%s: %v", ident, err)
		}
		if !m.IsCandidate() || m.SnapshotID != snap || m.Sequence != seq || m.ExpiresAt != exp.UTC().Format("2006-01-02T15:04:05.000Z") {
			t.Fatalf("%s: manifest %+v does not match its candidate pointer (snapshot %s, sequence %d, expires %s)", ident, m, snap, seq, exp)
		}
		out[ident] = storedCandidate{m: m, expiresAt: exp}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStageSignsCandidateManifestsRenewedOverMonths: staging signs one
// candidate manifest per target (phase candidate, the target's snapshot, a
// sequence above the current pointer's, activatedAt the staging time, the
// lease profile's lease) and writes none into the current-phase manifest
// history. `lease renew` re-signs the due candidates too. Over six
// simulated months RenewCandidates re-signs each
// manifest once its lease is due — same sequence and activatedAt, a later
// lease — and nothing while it is not; a revocation epoch raised since is
// carried into the re-signed manifest. The activation after all that moves
// every pointer with current-phase manifests above the candidates'
// sequences' predecessors, and removes the candidates. Every step goes
// through the three targets two at a time (batches of 2 and 1).
func TestStageSignsCandidateManifestsRenewedOverMonths(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *promoter.Options) { o.MoveBatch = 2 })
	ctx := context.Background()
	r1 := longWindows(release("prod", 1, 0, 3, nil, nil))
	f.promote(t, r1)
	r2 := longWindows(release("prod", 2, 1, 3, nil, nil))
	r2.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	r2.CommandID = id("stage", 2)
	f.now = t0.Add(time.Minute)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	staged := f.candidateManifests(t, "prod", 2)
	if len(staged) != 3 {
		t.Fatalf("%d candidate manifests, want 3", len(staged))
	}
	curSeq := map[string]int64{}
	rows, err := f.pool.Query(ctx, `SELECT host || '/' || service_id, sequence FROM configpub.current_pointer WHERE env_tag = 'prod'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var s int64
		if err := rows.Scan(&k, &s); err != nil {
			t.Fatal(err)
		}
		curSeq[k] = s
	}
	rows.Close()
	for _, tg := range r2.Targets {
		k := tg.Host + "/" + tg.ServiceID
		c, ok := staged[k]
		if !ok || c.m.SnapshotID != tg.SnapshotID {
			t.Fatalf("%s: candidate manifest %+v, want snapshot %s", k, c.m, tg.SnapshotID)
		}
		if c.m.Sequence <= curSeq[k] || c.m.ActivatedAt != "2026-11-29T12:01:00.000Z" || c.m.IssuedAt != c.m.ActivatedAt ||
			c.m.ExpiresAt != "2026-11-29T12:16:00.000Z" || c.m.RefreshAfter != "2026-11-29T12:06:00.000Z" {
			t.Fatalf("%s: candidate manifest %+v; want a sequence above the current %d, activated and issued at staging, a 5m/15m lease", k, c.m, curSeq[k])
		}
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.delivery_manifest d JOIN configpub.candidate_pointer c
		ON c.snapshot_id = d.snapshot_id`); n != 0 {
		t.Fatalf("%d current-phase manifests written for candidate snapshots", n)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.current_pointer WHERE position('"phase"' in convert_from(manifest, 'UTF8')) > 0`); n != 0 {
		t.Fatalf("%d current pointers carry a phase", n)
	}

	// Not due: nothing is signed.
	if n, err := f.store.RenewCandidates(ctx, "prod", 2); err != nil || n != 0 {
		t.Fatalf("renew before the refresh time: %d, %v; want 0", n, err)
	}
	// `lease renew` re-signs the due candidates with the current leases.
	f.now = t0.Add(10 * time.Minute)
	if res, err := f.store.RenewLeases(ctx, "prod"); err != nil || res.Renewed != 3 || res.Candidates != 3 {
		t.Fatalf("renew leases: %+v, %v; want 3 leases and 3 candidates", res, err)
	}
	for k, c := range f.candidateManifests(t, "prod", 2) {
		if c.m.IssuedAt != "2026-11-29T12:10:00.000Z" || c.m.Sequence != staged[k].m.Sequence {
			t.Fatalf("%s after lease renew: %+v, want issued at 12:10 with the staged sequence", k, c.m)
		}
	}
	if n, err := f.store.RenewCandidates(ctx, "prod", 2); err != nil || n != 0 {
		t.Fatalf("renew right after lease renew: %d, %v; want 0", n, err)
	}
	for month := 1; month <= 6; month++ {
		f.now = t0.AddDate(0, month, 0)
		if month == 4 {
			if _, err := f.store.RaiseEpoch(ctx, promoter.EpochInput{EnvTag: "prod", Epoch: 7, Actor: "sec", Reason: "leak", CommandID: id("epoch")}); err != nil {
				t.Fatal(err)
			}
		}
		n, err := f.store.RenewCandidates(ctx, "prod", 2)
		if err != nil || n != 3 {
			t.Fatalf("month %d: renewed %d, %v; want 3", month, n, err)
		}
		for k, c := range f.candidateManifests(t, "prod", 2) {
			first := staged[k].m
			if !c.expiresAt.After(f.now) || c.m.IssuedAt != f.now.UTC().Format("2006-01-02T15:04:05.000Z") ||
				c.m.ActivatedAt != first.ActivatedAt || c.m.SnapshotID != first.SnapshotID {
				t.Fatalf("month %d %s: renewed manifest %+v; want issued now, live, same snapshot and activatedAt", month, k, c.m)
			}
			if month < 4 && c.m.Sequence != first.Sequence {
				t.Fatalf("month %d %s: sequence %d changed from %d by a renewal", month, k, c.m.Sequence, first.Sequence)
			}
			if month >= 4 && (c.m.RevocationEpoch != 7 || c.m.Sequence <= curSeq[k]) {
				t.Fatalf("month %d %s: manifest %+v, want epoch 7 and a sequence above the current pointer's", month, k, c.m)
			}
		}
		if n, err := f.store.RenewCandidates(ctx, "prod", 2); err != nil || n != 0 {
			t.Fatalf("month %d: second renewal signed %d, %v; want 0", month, n, err)
		}
	}
	for _, tg := range r2.Targets {
		f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
	}
	if _, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"},
		promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	f.wantPointersAt(t, r2)
	if n := f.count(t, "SELECT count(*) FROM configpub.candidate_pointer"); n != 0 {
		t.Fatalf("%d candidate pointers left after the activation", n)
	}
	f.checkJournal(t)
}

// TestTwoPhaseWaitKeepsCandidateLeasesLive: while a two-phase activation
// waits (no runtime has answered), simulated time runs ten minutes per
// readiness check, past the 15-minute candidate lease twice over; at every
// check each stored candidate manifest is still live, because the wait
// renews them. Without the renewal the third check would find them expired.
func TestTwoPhaseWaitKeepsCandidateLeasesLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := longWindows(release("prod", 1, 0, 3, nil, nil))
	f.promote(t, r1)
	r2 := longWindows(release("prod", 2, 1, 3, nil, nil))
	r2.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	checks := 0
	var expired []string
	_, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"},
		promoter.ActivateOptions{Timeout: 800 * time.Millisecond, Poll: 50 * time.Millisecond, Progress: func(promoter.ReadinessProgress) {
			checks++
			for k, c := range f.candidateManifests(t, "prod", 2) {
				if !c.expiresAt.After(f.now) {
					expired = append(expired, k)
				}
			}
			f.now = f.now.Add(10 * time.Minute)
		}})
	if !errors.Is(err, promoter.ErrNotReady) {
		t.Fatalf("activate without receipts: %v, want a timeout", err)
	}
	if checks < 4 || len(expired) != 0 {
		t.Fatalf("%d readiness checks (want at least 4, covering %s of simulated time); expired candidate leases at a check: %v",
			checks, 40*time.Minute, expired)
	}
	f.wantPointersAt(t, r1)
}

// TestPlainActivateRefusesAnIntegrityError: a staged release whose outcome
// is INTEGRITY_ERROR (a receipt contradicts the journal) is refused by the
// plain Store.Activate too, not only by the two-phase ActivateRelease:
// ErrIntegrity, nothing moved, the release still STAGED/INTEGRITY_ERROR,
// and no pointer move or intent journaled.
func TestPlainActivateRefusesAnIntegrityError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1, r2 := f.stageTwoPhase(t, "prod", 3)
	for _, tg := range r2.Targets {
		f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
	}
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCurrent, bundle.ResultApplied, "")
	if _, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"},
		promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 50 * time.Millisecond}); !errors.Is(err, promoter.ErrIntegrity) {
		t.Fatalf("two-phase activate: %v, want an integrity error", err)
	}
	journal := f.count(t, "SELECT count(*) FROM configpub.config_release_journal WHERE release_version = 2")
	_, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: id("plain"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "plain"})
	if !errors.Is(err, promoter.ErrIntegrity) {
		t.Fatalf("plain activate of an INTEGRITY_ERROR release: %v, want ErrIntegrity", err)
	}
	f.wantPointersAt(t, r1)
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 0 {
		t.Fatalf("%d pointer moves for release 2", n)
	}
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateStaged || o != promoter.OutcomeIntegrityError {
		t.Fatalf("release 2 is %s/%s, want STAGED/INTEGRITY_ERROR", s, o)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.config_release_journal WHERE release_version = 2"); n != journal {
		t.Fatalf("the refused activation journaled %d rows", n-journal)
	}
	f.checkJournal(t)
}
