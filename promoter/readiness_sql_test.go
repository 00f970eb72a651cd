package promoter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/promoter"
)

// The readiness check's statements as they were before each target looked
// up its own receipts: the oracles the rewritten statements must agree with.
const (
	oracleCandidateReceipts = `SELECT DISTINCT ON (e.host, e.service_id) e.host, e.service_id,
			e.snapshot_id::text, e.outcome, e.reason
		FROM configpub.config_release_target rt
		JOIN configpub.runtime_evidence e ON e.env_tag = rt.env_tag AND e.host = rt.host
			AND e.service_id = rt.service_id AND e.snapshot_id = rt.snapshot_id
		WHERE rt.env_tag = $1 AND rt.release_version = $2 AND e.kind = 'receipt' AND e.phase = 'candidate'
		  AND e.reported_at >= coalesce((SELECT j.recorded_at FROM configpub.config_release_journal j
			WHERE j.env_tag = $1 AND j.release_version = $2 AND j.event_kind = 'stage'
			ORDER BY j.sequence LIMIT 1), '-infinity')
		ORDER BY e.host, e.service_id, e.evidence_id DESC`
	oracleContradictedCandidate = `SELECT e.host || '/' || e.service_id, e.snapshot_id::text, e.evidence_id
		FROM configpub.config_release_target rt
		JOIN configpub.runtime_evidence e ON e.env_tag = rt.env_tag AND e.host = rt.host
			AND e.service_id = rt.service_id AND e.snapshot_id = rt.snapshot_id
		WHERE rt.env_tag = $1 AND rt.release_version = $2 AND e.kind = 'receipt' AND e.phase = 'current'
		  AND e.outcome = 'APPLIED'
		  AND NOT EXISTS (SELECT 1 FROM configpub.pointer_move m WHERE m.env_tag = rt.env_tag AND m.host = rt.host
			AND m.service_id = rt.service_id AND m.next_snapshot_id = rt.snapshot_id)
		ORDER BY e.evidence_id LIMIT 1`
)

// rowsOf runs sql with args and returns every row, each column as text.
func (f *fixture) rowsOf(t testing.TB, sql string, args ...any) [][]string {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var out [][]string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(vals))
		for i, v := range vals {
			row[i] = fmt.Sprint(v)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadinessStatementsAgreeWithTheirOracles checks that the readiness
// check's statements (CandidateReceipts, the contradiction check) give the
// same answers as the join statements they replaced, on two environments
// with the same identities, releases promoted, staged and kept unchanged
// (a target of a later release with an earlier release's snapshot), and
// rounds of random evidence: receipts and observations, both phases,
// every outcome, about current, candidate, older and unknown snapshots,
// reported before and after the staging.
func TestReadinessStatementsAgreeWithTheirOracles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	const n = 9
	// a: 1 and 2 promoted (2 keeps 1's snapshot of every third target),
	// 3 staged two-phase at t0+3h (keeping 2's or 1's snapshot of every
	// odd target). b: 1 promoted, 2 staged at t0+3h.
	keep2 := func(i int) bool { return i%3 != 0 }
	f.promote(t, release("a", 1, 0, n, nil, nil))
	f.promote(t, release("a", 2, 1, n, keep2, func(int) int64 { return 1 }))
	f.promote(t, release("b", 1, 0, n, nil, nil))
	f.now = t0.Add(3 * time.Hour)
	a3 := release("a", 3, 2, n, func(i int) bool { return i%2 == 0 }, func(i int) int64 {
		if keep2(i) {
			return 2
		}
		return 1
	})
	b2 := release("b", 2, 1, n, nil, nil)
	for _, st := range []promoter.ReleaseInput{a3, b2} {
		st.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
		st.CommandID = id("stage", st.EnvTag, st.ReleaseVersion)
		if _, err := f.store.Stage(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	type evidence struct {
		kind, phase, outcome []string
	}
	kinds := []evidence{
		{[]string{"receipt"}, []string{"candidate"}, []string{"READY", "REJECTED"}},
		{[]string{"receipt"}, []string{"current"}, []string{"APPLIED", "REJECTED"}},
		{[]string{"observation"}, []string{"current"}, []string{"APPLIED", "REJECTED"}},
	}
	times := []time.Time{t0.Add(time.Hour), t0.Add(3 * time.Hour), t0.Add(5 * time.Hour)}
	rng := rand.New(rand.NewPCG(1, 31))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var receipts, contradictions int
	for round := 0; round < 12; round++ {
		for k := 0; k < 25; k++ {
			env := pick([]string{"a", "b"})
			i := rng.IntN(n)
			snap := id("snap", env, i, int64(1+rng.IntN(3)))
			if rng.IntN(10) == 0 {
				snap = id("snap", "unknown", i, round)
			}
			ev := kinds[rng.IntN(len(kinds))]
			if _, err := f.pool.Exec(ctx, `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag,
					snapshot_id, outcome, reason, kind, phase, reported_at)
				VALUES ($1, 'svc', $2, $3, $4, $5, $6, $7, $8)`,
				fmt.Sprintf("host-%05d", i), env, snap, pick(ev.outcome), fmt.Sprintf("r%d.%d", round, k),
				pick(ev.kind), pick(ev.phase), times[rng.IntN(len(times))]); err != nil {
				t.Fatal(err)
			}
		}
		for _, er := range []struct {
			env string
			rel int64
		}{{"a", 1}, {"a", 2}, {"a", 3}, {"a", 4}, {"b", 1}, {"b", 2}, {"c", 1}} {
			want := f.rowsOf(t, oracleCandidateReceipts, er.env, er.rel)
			got := f.rowsOf(t, promoter.CandidateReceiptsSQL, er.env, er.rel)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %s release %d: candidate receipts\n got %v\nwant %v", round, er.env, er.rel, got, want)
			}
			receipts += len(got)
			want = f.rowsOf(t, oracleContradictedCandidate, er.env, er.rel)
			got = f.rowsOf(t, promoter.ContradictedCandidateSQL, er.env, er.rel)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, %s release %d: contradicted candidate\n got %v\nwant %v", round, er.env, er.rel, got, want)
			}
			contradictions += len(got)
		}
	}
	// The data set must exercise both statements, not only their empty answers.
	if receipts < 50 || contradictions < 10 {
		t.Fatalf("only %d candidate receipts and %d contradictions compared: the data set is too thin", receipts, contradictions)
	}
}

// TestReadinessCheckIsOneProbePerTarget runs the readiness check's
// statements right after a 2,000-target release was staged and its READY
// receipts arrived, before the tables' statistics know of them (autovacuum
// off, as in the minute before it analyzes): each must read a few buffers
// per target. The join statements they replaced were planned, on those
// statistics, as a nested loop comparing every target with every receipt
// of the environment (about 48 buffers per target here; 5.4 million
// buffers and 20 to 42 s at 10,000 targets).
func TestReadinessCheckIsOneProbePerTarget(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	const n = 2000
	for _, table := range []string{"runtime_evidence", "config_release_target", "pointer_move", "config_release_journal"} {
		if _, err := f.pool.Exec(ctx, `ALTER TABLE configpub.`+table+` SET (autovacuum_enabled = false)`); err != nil {
			t.Fatal(err)
		}
	}
	f.promote(t, release("bench", 1, 0, n, nil, nil))
	st := release("bench", 2, 1, n, nil, nil)
	st.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	st.CommandID = id("stage", "bench", 2)
	if _, err := f.store.Stage(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome,
			reason, release_version, kind, phase, reported_at)
		SELECT rt.host, rt.service_id, rt.env_tag, rt.snapshot_id, 'READY', '', rt.release_version, 'receipt', 'candidate', $3
		FROM configpub.config_release_target rt WHERE rt.env_tag = $1 AND rt.release_version = $2`, "bench", 2, f.now); err != nil {
		t.Fatal(err)
	}
	for name, sql := range map[string]string{"candidate receipts": promoter.CandidateReceiptsSQL,
		"contradicted candidate": promoter.ContradictedCandidateSQL} {
		var plan []struct {
			Plan struct {
				Hit  int64 `json:"Shared Hit Blocks"`
				Read int64 `json:"Shared Read Blocks"`
			}
			ExecutionTime float64 `json:"Execution Time"`
		}
		var raw []byte
		if err := f.pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+sql, "bench", 2).Scan(&raw); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: plan %s: %v", name, raw, err)
		}
		buffers := plan[0].Plan.Hit + plan[0].Plan.Read
		t.Logf("%s: %d buffers, %.1f ms at %d targets", name, buffers, plan[0].ExecutionTime, n)
		if buffers > 10*n {
			t.Errorf("%s read %d buffers at %d targets (more than 10 per target): it does not look up each target's receipts by index\n%s",
				name, buffers, n, raw)
		}
	}
}
