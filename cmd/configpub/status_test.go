package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
)

// TestStatusAndHistoryKeepRuntimeEvidenceApart: receipts read back by the
// control plane say host-a runs its desired snapshot and rejected a
// tampered response since (APPLIED, one rejection apart), and host-b still
// runs release 1's snapshot after release 2 moved it (PUBLISHED, diverged,
// acknowledgement pending); its report about release 1 stays with release
// 1's move in history. host-b's own later report (an observation, workload
// token) that it applied the desired snapshot is shown as UNVERIFIED and
// changes none of that. Text and JSON.
func TestStatusAndHistoryKeepRuntimeEvidenceApart(t *testing.T) {
	db := pgtest.New(t)
	_, signer := testKey(t)
	snaps := seedReleases(t, db, signer)
	ctx := context.Background()
	// Receipts as readback records them and an observation as the Config
	// Server stores it, each just after the first move (reported_at is the
	// database's clock).
	for _, r := range []struct {
		host, outcome, reason, snapshot, kind string
		afterMicros                           int
	}{
		{"host-a", "APPLIED", "NEW_SNAPSHOT", snaps[1][0], "receipt", 1},
		{"host-b", "APPLIED", "NEW_SNAPSHOT", snaps[1][1], "receipt", 1},
		{"host-a", "REJECTED", "DIGEST_MISMATCH", snaps[1][0], "receipt", 2},
		{"host-b", "APPLIED", "NEW_SNAPSHOT", snaps[2][1], "observation", 0},
	} {
		at := `(SELECT moved_at FROM configpub.pointer_move WHERE host = $1 ORDER BY move_id LIMIT 1) + $5::int * interval '1 microsecond'`
		if r.kind == "observation" {
			at = `now() + $5::int * interval '1 microsecond'` // after every move
		}
		if _, err := db.Pool(t).Exec(ctx, `INSERT INTO configpub.runtime_evidence
			(host, service_id, env_tag, snapshot_id, outcome, reason, running_snapshot_id, lkg_snapshot_id, reported_at, kind, endpoint)
			SELECT $1, 'svc', 'prod', $2::uuid, $3, $4, $2::uuid, $2::uuid, `+at+`, $6,
				CASE WHEN $6 = 'receipt' THEN 'http://runtime.example/status' ELSE '' END`,
			r.host, r.snapshot, r.outcome, r.reason, r.afterMicros, r.kind); err != nil {
			t.Fatal(err)
		}
	}
	d := "--database=" + db.URL

	st, out := statusJSON(t, d)
	if len(st.Targets) != 2 {
		t.Fatalf("got %d targets", len(st.Targets))
	}
	a, b := st.Targets[0], st.Targets[1]
	if a.State != promoter.TargetApplied || a.Running == nil || a.Running.SnapshotID != snaps[2][0] || a.Diverged ||
		a.AcknowledgedAt == nil || a.LastRejection == nil || a.LastRejection.Reason != "DIGEST_MISMATCH" || a.RejectionsSinceMove != 1 {
		t.Fatalf("host-a: got %+v, want APPLIED running the desired snapshot with one DIGEST_MISMATCH apart", a)
	}
	if b.State != promoter.TargetPublished || b.Running == nil || b.Running.SnapshotID != snaps[1][1] || b.Running.ReleaseVersion != 1 ||
		!b.Diverged || b.AcknowledgedAt != nil || b.LastRejection != nil || b.SnapshotID != snaps[2][1] {
		t.Fatalf("host-b: got %+v, want PUBLISHED, desired %s, running release 1's %s, diverged, unacknowledged", b, snaps[2][1], snaps[1][1])
	}
	if a.LastObservation != nil || b.LastObservation == nil || b.LastObservation.Kind != "observation" || b.LastObservation.SnapshotID != snaps[2][1] ||
		b.LastReceipt == nil || b.LastReceipt.Kind != "receipt" {
		t.Fatalf("host-b: got last observation %+v, last receipt %+v; want its unverified APPLIED report apart from its receipt", b.LastObservation, b.LastReceipt)
	}
	for _, k := range []string{`"running"`, `"diverged"`, `"acknowledgedAt"`, `"ackLagSeconds"`, `"lastRejection"`, `"rejectionsSinceMove"`, `"kind": "observation"`} {
		if !strings.Contains(out, k) {
			t.Errorf("status json lacks %s", k)
		}
	}

	// Every release can be activated in whole until its snapshots'
	// windows end (seedReleases: an hour ago to 24 hours ahead).
	for _, r := range st.Releases {
		if r.ActivatableFrom == nil || r.ActivatableUntil == nil || r.ActivatableUntil.Sub(*r.ActivatableFrom) != 25*time.Hour {
			t.Errorf("status json: release %d activatable from %v until %v, want its snapshots' 25-hour window", r.ReleaseVersion, r.ActivatableFrom, r.ActivatableUntil)
		}
	}

	out, code := runStore("status", "--env", "prod", d)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if until := st.Releases[0].ActivatableUntil; until == nil || !strings.Contains(out, "ACTIVATABLE") ||
		!strings.Contains(out, "until "+until.Format(time.RFC3339)) {
		t.Errorf("status text lacks the releases' ACTIVATABLE column (until %v):\n%s", until, out)
	}
	lines := strings.Split(out, "\n")
	var rowA, rowB string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "host-a/svc"):
			rowA = l
		case strings.HasPrefix(l, "host-b/svc"):
			rowB = l
		}
	}
	for _, w := range []string{"APPLIED", "desired", " no ", "after ", "DIGEST_MISMATCH", "(1 since move)"} {
		if !strings.Contains(rowA, w) {
			t.Errorf("host-a row lacks %q: %q", w, rowA)
		}
	}
	for _, w := range []string{"PUBLISHED", "(release 1)", " yes ", "pending ", "APPLIED desired at "} {
		if !strings.Contains(rowB, w) {
			t.Errorf("host-b row lacks %q: %q", w, rowB)
		}
	}

	out, code = runStore("history", "--env", "prod", "--target", "host-b/svc", "--output", "json", d)
	if code != 0 {
		t.Fatalf("history: exit %d\n%s", code, out)
	}
	var moves []promoter.Move
	if err := json.Unmarshal([]byte(out), &moves); err != nil {
		t.Fatal(err)
	}
	if len(moves) != 2 || moves[0].NextSnapshotID != snaps[1][1] || moves[0].AppliedAt == nil || moves[1].AppliedAt != nil {
		t.Fatalf("history: got %+v, want release 1's move applied and release 2's not", moves)
	}
	out, _ = runStore("history", "--env", "prod", "--target", "host-b/svc", d)
	if !strings.Contains(out, "applied after") {
		t.Errorf("history text lacks the report: %s", out)
	}

	// Revocations: none yet, then the snapshot revoke recorded.
	if out, code := runStore("history", "--env", "prod", "--revocations", d); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("history --revocations before any: exit %d, want the header alone:\n%s", code, out)
	}
	if out, code := runStore("revoke", "--snapshot", snaps[1][1], "--reason", "leaked prompt", "--actor", "sec", d); code != 0 {
		t.Fatalf("revoke: exit %d\n%s", code, out)
	}
	out, code = runStore("history", "--env", "prod", "--revocations", d)
	if code != 0 || !strings.Contains(out, "snapshot "+snaps[1][1][:8]+" (host-b/svc)") || !strings.Contains(out, "leaked prompt") {
		t.Errorf("history --revocations: exit %d, want the snapshot of host-b/svc and its reason:\n%s", code, out)
	}
	out, _ = runStore("history", "--env", "prod", "--revocations", "-o", "json", d)
	var revs []promoter.RevocationRecord
	if err := json.Unmarshal([]byte(out), &revs); err != nil || len(revs) != 1 || revs[0].SnapshotID != snaps[1][1] ||
		revs[0].Host != "host-b" || revs[0].Actor != "sec" || revs[0].ReleaseVersion != 1 {
		t.Errorf("history --revocations -o json: %v, %+v; want the one snapshot revocation", err, revs)
	}
	if out, code := runStore("history", "--env", "prod", "--revocations", "--releases", d); code != exitUsage {
		t.Errorf("--revocations with --releases: exit %d, want %d\n%s", code, exitUsage, out)
	}

	for _, target := range []string{"nosuch.example", "host-b/nosuch"} {
		if out, code := runStore("history", "--env", "prod", "--target", target, d); code != exitRefused || !strings.Contains(out, `"`+target+`"`) {
			t.Errorf("history --target %s: exit %d, want 1 naming the target (not an empty history)\n%s", target, code, out)
		}
	}
	for _, verb := range []string{"status", "history"} {
		out, code := runStore(verb, "--env", "nosuch", d)
		if code != exitRefused || !strings.Contains(out, `"nosuch"`) {
			t.Errorf("%s --env nosuch: exit %d, want 1 naming the environment\n%s", verb, code, out)
		}
	}
}

// TestStatusAndHistoryMarkRenewals: release 2 of seedReleases is compiled
// from release 1's sources (a renewal); status marks it in RENEWAL and
// the JSON, history marks its moves and its journal events, and release 1
// is marked nowhere.
func TestStatusAndHistoryMarkRenewals(t *testing.T) {
	db := pgtest.New(t)
	_, signer := testKey(t)
	seedReleases(t, db, signer)
	d := "--database=" + db.URL

	st, _ := statusJSON(t, d)
	if len(st.Releases) != 2 || st.Releases[0].Renewal || !st.Releases[1].Renewal {
		t.Fatalf("status json releases %+v, want release 2 alone a renewal", st.Releases)
	}
	out, _ := runStore("status", "--env", "prod", d)
	rows := map[string]string{} // release table rows by release version
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "1" || f[0] == "2") {
			rows[f[0]] = l
		}
	}
	if !strings.Contains(out, "RENEWAL") || !strings.Contains(rows["1"], " no ") || strings.Contains(rows["1"], " yes ") ||
		!strings.Contains(rows["2"], " yes ") {
		t.Errorf("status text: want RENEWAL no for release 1 and yes for release 2:\n%s", out)
	}

	for _, args := range [][]string{{"history", "--env", "prod"}, {"history", "--env", "prod", "--releases"}} {
		out, code := runStore(append(args, d)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, out)
		}
		var renewal, other int
		for _, l := range strings.Split(out, "\n") {
			switch {
			case strings.Contains(l, "\t") || l == "" || strings.HasPrefix(l, "TIME"):
			case strings.Contains(l, " 2 (renewal) "):
				renewal++
			case strings.Contains(l, " 1 ") && !strings.Contains(l, "renewal"):
				other++
			}
		}
		if renewal == 0 || other == 0 || strings.Contains(out, "1 (renewal)") {
			t.Errorf("%v: %d rows of release 2 marked (renewal), %d of release 1 unmarked; want both:\n%s", args, renewal, other, out)
		}
	}
	out, _ = runStore("history", "--env", "prod", "--output", "json", d)
	var moves []promoter.Move
	if err := json.Unmarshal([]byte(out), &moves); err != nil {
		t.Fatal(err)
	}
	for _, m := range moves {
		if m.Renewal != (m.ReleaseVersion == 2) {
			t.Errorf("history json: move of release %d renewal %v", m.ReleaseVersion, m.Renewal)
		}
	}
}

// statusJSON runs status -o json for environment prod with database flag
// d: the status and the output.
func statusJSON(t *testing.T, d string) (promoter.Status, string) {
	t.Helper()
	out, code := runStore("status", "--env", "prod", "--output", "json", d)
	if code != 0 {
		t.Fatalf("status json: exit %d\n%s", code, out)
	}
	var st promoter.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, out)
	}
	return st, out
}
