package promoter_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/sqlstate"
	"github.com/configpub/configpub/promoter"
)

// servedManifests is, per identity and snapshot, the manifest the Config
// Server serves for it (the newest issued, as its snapshot query orders
// them), and the current pointers' checksum.
func (f *fixture) servedManifests(t *testing.T) map[string]string {
	t.Helper()
	var pointers string
	if err := f.pool.QueryRow(context.Background(), `SELECT md5(string_agg(p::text, ',' ORDER BY env_tag, host, service_id))
		FROM configpub.current_pointer p`).Scan(&pointers); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(context.Background(), `SELECT DISTINCT ON (host, service_id, env_tag, snapshot_id)
			host || '/' || service_id || '/' || env_tag || '/' || snapshot_id::text, md5(manifest) || ' ' || signature
		FROM configpub.delivery_manifest
		ORDER BY host, service_id, env_tag, snapshot_id, issued_at DESC, sequence DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{"pointers": pointers}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCollectRenewalsOverMonths: over simulated months of twice-daily lease
// renewals, two releases and a rollback, collecting superseded renewals
// removes exactly the renewals issued before the cutoff that a later
// manifest of the same move supersedes, in statements of a bounded number
// of identities, each summarised in configpub.collected_renewals; it
// keeps every move's manifest and the newest manifest of every move, so
// every snapshot, current or historical, is served as before. A dry run
// counts without removing; nothing but the collection may delete a
// manifest.
func TestCollectRenewalsOverMonths(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	day := 24 * time.Hour
	renewUntil := func(end time.Duration) {
		t.Helper()
		for f.now.Before(t0.Add(end)) {
			f.now = f.now.Add(12 * time.Hour)
			if _, err := f.store.RenewLeases(ctx, "prod"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Day 0: release 1; renewed every 12 hours to day 10 (20 renewals).
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	renewUntil(10 * day)
	// Day 10, one hour on: release 2 moves every pointer; renewed to day 15 (10).
	f.now = t0.Add(10*day + time.Hour)
	f.promote(t, release("prod", 2, 1, 3, nil, nil))
	f.now = t0.Add(10 * day)
	renewUntil(15 * day)
	// Day 15, one hour on: a rollback to release 1 (a new move of the same
	// snapshots); renewed to day 20 (10).
	f.now = t0.Add(15*day + time.Hour)
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("renewals rb"), EnvTag: "prod", ToRelease: 1,
		Actor: "ops", Reason: "back"}); err != nil {
		t.Fatal(err)
	}
	f.now = t0.Add(15 * day)
	renewUntil(20 * day)
	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind = 'renew'"); n != 3*40 {
		t.Fatalf("got %d renewal manifests, want 3 identities × 40", n)
	}
	moves := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind <> 'renew'")
	served := f.servedManifests(t)

	// The collector: the promoter role, on its own clock.
	var offset time.Duration
	pool := f.db.PoolURL(t, f.db.URLFor(t, "configpub_promoter"))
	gc, err := promoter.Open(ctx, pool, promoter.Options{Clock: func() time.Time { return t0.Add(offset) }})
	if err != nil {
		t.Fatal(err)
	}
	collect := func(when string, at, minAge time.Duration, dry bool, want int64) promoter.RenewalCollection {
		t.Helper()
		offset = at
		c, err := gc.CollectRenewals(ctx, promoter.RenewalCollectOptions{MinAge: minAge, Batch: 2, DryRun: dry})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if minAge == 0 {
			minAge = promoter.DefaultRenewalMinAge
		}
		if c.Manifests != want || !c.IssuedBefore.Equal(t0.Add(at-minAge)) {
			t.Fatalf("%s: removed %d renewals before %s, want %d before %s", when, c.Manifests, c.IssuedBefore, want, t0.Add(at-minAge))
		}
		if want > 0 && (c.Bytes <= 0 || c.Oldest.IsZero() || c.Newest.Before(c.Oldest)) {
			t.Fatalf("%s: %+v: want bytes and issue times", when, c)
		}
		return c
	}
	// Day 25, renewals older than 20 days: those issued on days 0.5–4.5 (9 of release 1's move per identity).
	c := collect("day 25", 25*day, 20*day, false, 3*9)
	if !c.Oldest.Equal(t0.Add(12*time.Hour)) || !c.Newest.Equal(t0.Add(4*day+12*time.Hour)) {
		t.Errorf("day 25: removed renewals issued %s to %s, want day 0.5 to day 4.5", c.Oldest, c.Newest)
	}
	// Day 60, the default 30 days: every other superseded renewal (10 + 9 + 9 per identity); a dry run first.
	collect("day 60, dry run", 60*day, 30*24*time.Hour, true, 3*28)
	collect("day 60", 60*day, 0, false, 3*28)
	collect("day 60, again", 60*day, 0, false, 0)
	collect("day 400", 400*day, 0, false, 0)

	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind = 'renew'"); n != 3*3 {
		t.Errorf("%d renewal manifests left, want the newest of each of 3 moves × 3 identities", n)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind <> 'renew'"); n != moves {
		t.Errorf("%d move manifests left, want all %d", n, moves)
	}
	after := f.servedManifests(t)
	if len(after) != len(served) || len(served) != 1+3*2 {
		t.Errorf("served manifests: %d before, %d after, want 1 + 3 identities × 2 snapshots", len(served), len(after))
	}
	for k, v := range served {
		if after[k] != v {
			t.Errorf("%s: served %q after the collection, %q before", k, after[k], v)
		}
	}
	// Two statements (2 + 1 identities) per collection that removed anything.
	var rows, total int
	if err := f.pool.QueryRow(ctx, `SELECT count(*), sum(manifests) FROM configpub.collected_renewals`).Scan(&rows, &total); err != nil {
		t.Fatal(err)
	}
	if rows != 4 || total != 3*37 {
		t.Errorf("collected_renewals: %d rows summing %d, want 4 rows summing %d", rows, total, 3*37)
	}
	// Nothing else deletes a manifest: not the promoter role, not the owner.
	for who, p := range map[string]interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}{"promoter": pool, "owner": f.pool} {
		_, err := p.Exec(ctx, "DELETE FROM configpub.delivery_manifest WHERE kind = 'move'")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != sqlstate.InsufficientPrivilege && pgErr.Code != "CP001") {
			t.Errorf("%s: DELETE of a manifest: got %v, want refused", who, err)
		}
	}
	if _, err := gc.CollectRenewals(ctx, promoter.RenewalCollectOptions{MinAge: -time.Hour}); !errors.Is(err, promoter.ErrInvalid) {
		t.Errorf("negative minimum age: got %v, want ErrInvalid", err)
	}
}

// TestCollectObservationsOverMonths: over simulated weeks of runtimes
// reporting an APPLIED observation at every twice-daily lease renewal (as
// the Config Server's role inserts them), with a REJECTED observation and
// receipts among them, collecting superseded observations removes exactly
// the APPLIED observations reported before the cutoff that a later
// observation of the same identity supersedes, in statements of a bounded
// number of identities, each summarised in
// configpub.collected_observations; receipts, the rejection and every
// identity's newest observation stay, and status shows the same last
// observation, receipt and state. A dry run counts without removing;
// nothing but the collection may delete a report.
func TestCollectObservationsOverMonths(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	day := 24 * time.Hour
	f.promote(t, release("prod", 1, 0, 3, nil, nil))
	type ident struct{ host, svc, aud, snap string }
	var ids []ident
	rows, err := f.pool.Query(ctx, `SELECT p.host, p.service_id, s.audience, p.snapshot_id::text
		FROM configpub.current_pointer p JOIN configpub.config_snapshot s USING (snapshot_id) ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var x ident
		if err := rows.Scan(&x.host, &x.svc, &x.aud, &x.snap); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x)
	}
	if rows.Err() != nil || len(ids) != 3 {
		t.Fatalf("identities: %v, %v", ids, rows.Err())
	}
	server := f.db.PoolURL(t, f.db.URLFor(t, "configpub_server"))
	report := func(x ident, kind, outcome, reason string, at time.Time) {
		t.Helper()
		sql := `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome, reason,
				artifact_digest, content_digest, policy_digest, reported_at)
			VALUES ($1, $2, 'prod', $3::uuid, $4, $5, '', '', '', $6)`
		p := server
		if kind == "receipt" { // only the control plane writes receipts
			sql = `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome, reason,
					artifact_digest, content_digest, policy_digest, reported_at, kind, phase, running_snapshot_id)
				VALUES ($1, $2, 'prod', $3::uuid, $4, $5, '', '', '', $6, 'receipt', 'current', $3::uuid)`
			p = f.pool
		}
		if _, err := p.Exec(ctx, sql, x.host, x.svc, x.snap, outcome, reason, at); err != nil {
			t.Fatalf("report %s %s of %s: %v", kind, outcome, x.host, err)
		}
	}
	// Days 0.5 to 20: every identity reports APPLIED every 12 hours (40
	// each); identity 0 also rejects a tampered response on day 3, and a
	// receipt is read back on days 1 and 19 for every identity.
	for at := t0.Add(12 * time.Hour); !at.After(t0.Add(20 * day)); at = at.Add(12 * time.Hour) {
		for _, x := range ids {
			report(x, "observation", "APPLIED", "LEASE_RENEWED", at)
		}
		if at.Equal(t0.Add(3 * day)) {
			report(ids[0], "observation", "REJECTED", "DIGEST_MISMATCH", at.Add(time.Minute))
		}
		if at.Equal(t0.Add(day)) || at.Equal(t0.Add(19*day)) {
			for _, x := range ids {
				report(x, "receipt", "APPLIED", "NEW_SNAPSHOT", at.Add(time.Minute))
			}
		}
	}
	// Day 21: a receipt for identity 1 — a later report, but not an
	// observation: its newest observation still shows in status.
	report(ids[1], "receipt", "APPLIED", "NEW_SNAPSHOT", t0.Add(21*day))
	if n := f.count(t, "SELECT count(*) FROM configpub.runtime_evidence"); n != 3*40+1+3*2+1 {
		t.Fatalf("got %d reports, want 3 × 40 observations + 1 rejection + 7 receipts", n)
	}
	f.now = t0.Add(400 * day)
	before, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}

	var offset time.Duration
	pool := f.db.PoolURL(t, f.db.URLFor(t, "configpub_promoter"))
	gc, err := promoter.Open(ctx, pool, promoter.Options{Clock: func() time.Time { return t0.Add(offset) }})
	if err != nil {
		t.Fatal(err)
	}
	collect := func(when string, at, minAge time.Duration, dry bool, want int64) promoter.ObservationCollection {
		t.Helper()
		offset = at
		c, err := gc.CollectObservations(ctx, promoter.ObservationCollectOptions{MinAge: minAge, Batch: 2, DryRun: dry})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if minAge == 0 {
			minAge = promoter.DefaultObservationMinAge
		}
		if c.Observations != want || !c.ReportedBefore.Equal(t0.Add(at-minAge)) {
			t.Fatalf("%s: removed %d observations before %s, want %d before %s", when, c.Observations, c.ReportedBefore, want, t0.Add(at-minAge))
		}
		if want > 0 && (c.Bytes <= 0 || c.Oldest.IsZero() || c.Newest.Before(c.Oldest)) {
			t.Fatalf("%s: %+v: want bytes and report times", when, c)
		}
		return c
	}
	// Day 25, older than 20 days: the APPLIED ones of days 0.5–4.5 (9 per identity).
	c := collect("day 25", 25*day, 20*day, false, 3*9)
	if !c.Oldest.Equal(t0.Add(12*time.Hour)) || !c.Newest.Equal(t0.Add(4*day+12*time.Hour)) {
		t.Errorf("day 25: removed observations reported %s to %s, want day 0.5 to day 4.5", c.Oldest, c.Newest)
	}
	// Day 60, the default 30 days: the other 30 of every identity but its newest; a dry run first.
	collect("day 60, dry run", 60*day, 30*day, true, 3*30)
	collect("day 60", 60*day, 0, false, 3*30)
	collect("day 60, again", 60*day, 0, false, 0)
	collect("day 400", 400*day, 0, false, 0)

	if n := f.count(t, "SELECT count(*) FROM configpub.runtime_evidence WHERE kind = 'observation' AND outcome = 'APPLIED'"); n != 3 {
		t.Errorf("%d APPLIED observations left, want the newest of each of 3 identities", n)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.runtime_evidence WHERE kind = 'receipt' OR outcome = 'REJECTED'"); n != 8 {
		t.Errorf("%d receipts and rejections left, want all 8", n)
	}
	after, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for i := range before.Targets {
		b, a := before.Targets[i], after.Targets[i]
		if a.State != b.State || !sameEvidence(a.LastObservation, b.LastObservation) || !sameEvidence(a.LastReceipt, b.LastReceipt) ||
			!sameEvidence(a.LastRejection, b.LastRejection) || !sameEvidence(a.LastEvidence, b.LastEvidence) {
			t.Errorf("%s: status after the collection %+v, before %+v", a.Host, a, b)
		}
	}
	// Two statements (2 + 1 identities) per collection that removed anything.
	var nrows, total int
	if err := f.pool.QueryRow(ctx, `SELECT count(*), sum(observations) FROM configpub.collected_observations`).Scan(&nrows, &total); err != nil {
		t.Fatal(err)
	}
	if nrows != 4 || total != 3*39 {
		t.Errorf("collected_observations: %d rows summing %d, want 4 rows summing %d", nrows, total, 3*39)
	}
	// Nothing else deletes a report: not the promoter or server role, not the owner.
	for who, p := range map[string]interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}{"promoter": pool, "server": server, "owner": f.pool} {
		_, err := p.Exec(ctx, "DELETE FROM configpub.runtime_evidence WHERE kind = 'observation'")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != sqlstate.InsufficientPrivilege && pgErr.Code != "CP001") {
			t.Errorf("%s: DELETE of an observation: got %v, want refused", who, err)
		}
	}
	if _, err := gc.CollectObservations(ctx, promoter.ObservationCollectOptions{MinAge: -time.Hour}); !errors.Is(err, promoter.ErrInvalid) {
		t.Errorf("negative minimum age: got %v, want ErrInvalid", err)
	}
}

// sameEvidence reports whether a and b are the same report (or both none).
func sameEvidence(a, b *promoter.Evidence) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && a.Outcome == b.Outcome && a.Reason == b.Reason && a.SnapshotID == b.SnapshotID && a.ReportedAt.Equal(b.ReportedAt)
}

// TestCollectReceiptsChangesNoAnswer: over simulated weeks — release 1, a
// readback recording a receipt every day (each a new load after a lease
// renewal), release 2 with one runtime first rejecting it and another
// still running release 1 when first read, a rollback to
// release 1, a forward activation of release 2 — collecting repeated
// receipts removes exactly the APPLIED receipts with one of the same state
// before them in their move span and one after them, and status and
// history, every field of every target and move, answer exactly as before;
// a dry run counts without removing.
func TestCollectReceiptsChangesNoAnswer(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	day := 24 * time.Hour
	snapshots := func() map[string]string { // host -> current snapshot
		out := map[string]string{}
		rows, err := f.pool.Query(ctx, `SELECT host, snapshot_id::text FROM configpub.current_pointer`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var h, s string
			if err := rows.Scan(&h, &s); err != nil {
				t.Fatal(err)
			}
			out[h] = s
		}
		return out
	}
	type pointer struct{ host, svc, aud string }
	var ids []pointer
	receipt := func(x pointer, snap, running, outcome string, at time.Time) {
		t.Helper()
		if _, err := f.pool.Exec(ctx, `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome,
				reason, artifact_digest, content_digest, policy_digest, reported_at, loaded_at, kind, phase, running_snapshot_id, lkg_snapshot_id)
			VALUES ($1, $2, 'prod', $3::uuid, $4, '', '', '', '', $5, $5, 'receipt', 'current', $6::uuid, $6::uuid)`,
			x.host, x.svc, snap, outcome, at, running); err != nil {
			t.Fatalf("receipt of %s at %s: %v", x.host, at, err)
		}
	}
	daily := func(from, to int) { // a receipt of what each runs, days from..to
		t.Helper()
		cur := snapshots()
		for d := from; d <= to; d++ {
			for _, x := range ids {
				receipt(x, cur[x.host], cur[x.host], "APPLIED", t0.Add(time.Duration(d)*day))
			}
		}
	}
	f.promote(t, release("prod", 1, 0, 3, nil, nil))
	rows, err := f.pool.Query(ctx, `SELECT p.host, p.service_id, s.audience FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s USING (snapshot_id) ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var x pointer
		if err := rows.Scan(&x.host, &x.svc, &x.aud); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x)
	}
	if len(ids) != 3 {
		t.Fatalf("%d identities, want 3", len(ids))
	}
	r1 := snapshots()
	daily(1, 10) // span 1: release 1, 10 receipts each
	f.now = t0.Add(10*day + 12*time.Hour)
	f.promote(t, release("prod", 2, 1, 3, nil, nil))
	r2 := snapshots()
	// The first runtime rejects release 2 once, still running release 1.
	receipt(ids[0], r2[ids[0].host], r1[ids[0].host], "REJECTED", t0.Add(10*day+18*time.Hour))
	// The second still runs release 1 when first read after the move.
	receipt(ids[1], r1[ids[1].host], r1[ids[1].host], "APPLIED", t0.Add(10*day+20*time.Hour))
	daily(11, 15) // span 2: release 2, 5 each
	f.now = t0.Add(15*day + 12*time.Hour)
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("receipts rb"), EnvTag: "prod", ToRelease: 1,
		Actor: "ops", Reason: "back"}); err != nil {
		t.Fatal(err)
	}
	daily(16, 20) // span 3: release 1 again
	f.now = t0.Add(20*day + 12*time.Hour)
	if _, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: id("receipts fwd"), EnvTag: "prod", Release: 2,
		Actor: "ops", Reason: "forward"}); err != nil {
		t.Fatal(err)
	}
	daily(21, 25) // span 4: release 2 again
	f.now = t0.Add(26 * day)

	answers := func() (*promoter.Status, []promoter.Move) {
		t.Helper()
		st, err := f.store.Status(ctx, "prod")
		if err != nil {
			t.Fatal(err)
		}
		h, err := f.store.History(ctx, "prod", promoter.HistoryFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return st, h
	}
	st0, h0 := answers()
	if len(h0) != 12 {
		t.Fatalf("%d moves, want 4 per identity", len(h0))
	}

	gc, err := promoter.Open(ctx, f.db.PoolURL(t, f.db.URLFor(t, "configpub_promoter")),
		promoter.Options{Clock: func() time.Time { return t0.Add(400 * day) }})
	if err != nil {
		t.Fatal(err)
	}
	// Per identity, all but the first of span 1 (its last repeats in span
	// 3), all but the first of span 2 (its last repeats in span 4), and the
	// middle three of spans 3 and 4: 9 + 4 + 3 + 3.
	const want = 3 * (9 + 4 + 3 + 3)
	for _, step := range []struct {
		name   string
		minAge time.Duration
		dry    bool
		want   int64
		lo, hi time.Duration
	}{
		{"reported before day 12: span 1's", 388 * day, false, 3 * 9, 2 * day, 10 * day},
		{"dry run, the default age", 0, true, want - 3*9, 12 * day, 24 * day},
		{"the default age", 0, false, want - 3*9, 12 * day, 24 * day},
		{"again", 0, false, 0, 0, 0},
	} {
		c, err := gc.CollectReceipts(ctx, promoter.ObservationCollectOptions{MinAge: step.minAge, Batch: 2, DryRun: step.dry})
		if err != nil {
			t.Fatal(err)
		}
		if c.Receipts != step.want {
			t.Fatalf("%s: removed %d receipts, want %d", step.name, c.Receipts, step.want)
		}
		if step.want > 0 && (c.Bytes <= 0 || !c.Oldest.Equal(t0.Add(step.lo)) || !c.Newest.Equal(t0.Add(step.hi))) {
			t.Errorf("%s: %+v, want bytes, reported %s to %s", step.name, c, t0.Add(step.lo), t0.Add(step.hi))
		}
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.runtime_evidence"); n != 3*(10+5+5+5)+2-want {
		t.Errorf("%d receipts left, want %d", n, 3*(10+5+5+5)+2-want)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.collected_receipts"); n != 4 {
		t.Errorf("collected_receipts: %d rows, want 4 (2 + 1 identities per collection)", n)
	}
	st1, h1 := answers()
	if !reflect.DeepEqual(st0, st1) {
		t.Errorf("status changed by the collection:\nbefore %+v\nafter  %+v", st0, st1)
	}
	if !reflect.DeepEqual(h0, h1) {
		for i := range h0 {
			if !reflect.DeepEqual(h0[i], h1[i]) {
				t.Errorf("history move %d changed by the collection:\nbefore %+v\nafter  %+v", i, h0[i], h1[i])
			}
		}
	}
}
