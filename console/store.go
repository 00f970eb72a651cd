package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/dbschema"
)

// querier is the part of *pgxpool.Pool the read functions use.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// features are optional columns of newer schema versions; the console reads
// them when the database has them.
type features struct {
	retired     bool // current_pointer.retired_at, pointer_move.retired
	evidenceKnd bool // runtime_evidence.kind
	receipts    bool // runtime_evidence.phase (receipts read back by the control plane)
	summary     bool // release_target_summary (changed and kept counts per release)
	workflow    bool // configpub_workflow.workflow_view_summary, readable
	releaseCnt  bool // release_target_release_count (a mapping's targets by snapshot release)
	window      bool // release_target_summary.activatable_from/_until
	sources     bool // config_release.sources_digest
}

func loadFeatures(ctx context.Context, q querier) (features, error) {
	var f features
	err := q.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'configpub' AND table_name = 'current_pointer' AND column_name = 'retired_at')
		AND EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'configpub' AND table_name = 'pointer_move' AND column_name = 'retired'),
		EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'configpub' AND table_name = 'runtime_evidence' AND column_name = 'kind'),
		EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'configpub' AND table_name = 'runtime_evidence' AND column_name = 'phase'),
		EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = 'configpub' AND table_name = 'release_target_summary'),
		EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = 'configpub_workflow' AND table_name = 'workflow_view_summary'),
		EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = 'configpub' AND table_name = 'release_target_release_count'),
		EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'configpub' AND table_name = 'release_target_summary' AND column_name = 'activatable_until'),
		EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = 'configpub' AND table_name = 'config_release' AND column_name = 'sources_digest')`).
		Scan(&f.retired, &f.evidenceKnd, &f.receipts, &f.summary, &f.workflow, &f.releaseCnt, &f.window, &f.sources)
	if err != nil {
		return f, fmt.Errorf("read schema columns: %w", err)
	}
	return f, nil
}

// reader runs the console's queries.
type reader struct {
	q             querier
	atPage        int // time-travel page size; 0 = envAtListed
	f             features
	now           func() time.Time
	leaseHorizon  time.Duration
	journalListed int // journal events a page lists (the const journalListed; tests set fewer)
	showValues    bool
	repository    string // Options.RepositoryURL, checked
}

// receiptsOnly is the condition on runtime_evidence row alias that keeps
// the receipts about the current configuration: what the control plane
// read back from a runtime with its own credential. Only they set a
// target's state, applied counts and acknowledgement (as in configpub
// status); a runtime's own reports (observations) are listed, never
// counted. A database without receipts has none.
func (r *reader) receiptsOnly(alias string) string {
	if r.f.receipts {
		return alias + ".kind = 'receipt' AND " + alias + ".phase = 'current'"
	}
	return "false"
}

func (r *reader) retiredAtCol(alias string) string {
	if r.f.retired {
		return alias + ".retired_at"
	}
	return "NULL::timestamptz"
}

func (r *reader) moveRetiredCol(alias string) string {
	if r.f.retired {
		return alias + ".retired"
	}
	return "false"
}

// Environments lists every environment's overview.
func (r *reader) Environments(ctx context.Context) ([]Environment, error) {
	rows, err := r.q.Query(ctx, `SELECT env_tag FROM configpub.environment
		UNION SELECT DISTINCT env_tag FROM configpub.config_release ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	tags, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	out := make([]Environment, 0, len(tags))
	for _, tag := range tags {
		e, err := r.Environment(ctx, tag)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}

// overviewSQL computes, for $1's current pointers at time $2 with lease
// horizon $3, three kinds of rows: 'n' (state, count, expiring count,
// divergent count), 'lease' (the soonest-expiring leases) and 'div' (the
// first divergent targets). A target is judged as configpub status judges
// it, by the receipts read back about the current configuration: APPLIED
// when the last receipt, read since the pointer's last move, reads the
// runtime running the desired snapshot (its running snapshot, or an
// APPLIED receipt's; nothing when it failed closed) — one read before the
// move (an identity brought back at the snapshot it had before its
// retirement) confirms nothing — REJECTED when the last rejection is about the desired snapshot
// and came after the move, PUBLISHED otherwise; divergent when it runs
// another snapshot (or nothing), or is REJECTED. (The last receipt's
// outcome alone misjudged a runtime whose readback repeats an old
// rejection after the receipt of what it runs.) Revocations
// by publication are looked up per pointer only when there are any: the
// uncorrelated EXISTS runs once and spares 100,000 index probes at 100,000
// targets in the usual case.
func (r *reader) overviewSQL() string {
	return `WITH run AS (
			SELECT DISTINCT ON (host, service_id) host, service_id,
				coalesce(e.running_snapshot_id, CASE WHEN e.outcome = 'APPLIED' THEN e.snapshot_id END) AS runs, e.reported_at
			FROM configpub.runtime_evidence e WHERE env_tag = $1 AND ` + r.receiptsOnly("e") + `
			ORDER BY host, service_id, evidence_id DESC),
		rej AS (
			SELECT DISTINCT ON (host, service_id) host, service_id, snapshot_id, artifact_digest, reported_at
			FROM configpub.runtime_evidence e WHERE env_tag = $1 AND ` + r.receiptsOnly("e") + ` AND e.outcome = 'REJECTED'
			ORDER BY host, service_id, evidence_id DESC),
		cls AS (
			SELECT p.host, p.service_id, p.snapshot_id, p.lease_refresh_after, p.lease_expires_at, p.lease_valid_from, p.retired,
				run.runs, run.host IS NOT NULL AND run.runs IS DISTINCT FROM p.snapshot_id AS runs_other,
				run.reported_at >= p.moved_at AS run_since,
				rej.snapshot_id = p.snapshot_id AND rej.reported_at >= p.moved_at AS rejected, rej.artifact_digest AS rej_digest
			FROM (SELECT p.*, ` + r.retiredAtCol("p") + ` IS NOT NULL AS retired FROM configpub.current_pointer p WHERE p.env_tag = $1) p
			LEFT JOIN run ON run.host = p.host AND run.service_id = p.service_id
			LEFT JOIN rej ON rej.host = p.host AND rej.service_id = p.service_id),
		st AS MATERIALIZED (
			SELECT p.host, p.service_id, p.snapshot_id, p.lease_refresh_after AS refresh, p.lease_expires_at AS expires,
				-- About to expire: past its refresh point (a renewal is due), or
				-- ending within the horizon although the lease is longer than
				-- it (a lease shorter than the horizon always ends within it).
				p.lease_refresh_after <= $2 OR (p.lease_expires_at < $3 AND p.lease_expires_at - p.lease_valid_from > $3 - $2) AS expiring,
				CASE WHEN p.runs_other OR NOT coalesce(p.rejected, false) THEN p.runs ELSE p.snapshot_id END AS ev_snapshot,
				CASE WHEN p.runs_other AND p.runs IS NULL THEN 'NONE' WHEN p.runs_other THEN 'APPLIED'
					WHEN coalesce(p.rejected, false) THEN 'REJECTED' WHEN p.runs IS NOT NULL THEN 'APPLIED' ELSE '' END AS outcome,
				CASE WHEN NOT coalesce(p.runs_other, false) AND coalesce(p.rejected, false) THEN p.rej_digest END AS ev_digest,
				CASE WHEN p.retired THEN 'RETIRED'
					WHEN p.snapshot_id IN (SELECT snapshot_id FROM configpub.revocation WHERE snapshot_id IS NOT NULL)
						OR (EXISTS (SELECT 1 FROM configpub.revocation WHERE publication_id IS NOT NULL)
							AND EXISTS (SELECT 1 FROM configpub.config_snapshot rs
								JOIN configpub.revocation v ON v.publication_id = rs.publication_id
								WHERE rs.snapshot_id = p.snapshot_id)) THEN 'REVOKED'
					WHEN p.lease_expires_at <= $2 THEN 'LEASE_EXPIRED'
					WHEN p.runs = p.snapshot_id AND p.run_since THEN 'APPLIED'
					WHEN coalesce(p.rejected, false) THEN 'REJECTED'
					ELSE 'PUBLISHED' END AS state,
				coalesce(p.runs_other, false) OR (coalesce(p.rejected, false) AND p.runs IS DISTINCT FROM p.snapshot_id) AS divergent
			FROM cls p)
		SELECT 'n', state, count(*)::int,
			(count(*) FILTER (WHERE state <> 'RETIRED' AND expiring))::int,
			(count(*) FILTER (WHERE state <> 'RETIRED' AND divergent))::int,
			'', '', NULL::timestamptz, NULL::timestamptz, 0::bigint, 0::bigint, '', '', ''
		FROM st GROUP BY state
		UNION ALL (SELECT 'lease', state, 0, 0, 0, host, service_id, refresh, expires, 0, 0, '', '', ''
			FROM st WHERE state <> 'RETIRED' AND expiring ORDER BY expires, host, service_id LIMIT ` + fmt.Sprint(listed) + `)
		UNION ALL (SELECT 'div', st.state, 0, 0, 0, st.host, st.service_id, NULL, NULL, s.release_version,
				coalesce((SELECT es.release_version FROM configpub.config_snapshot es WHERE es.snapshot_id = st.ev_snapshot), 0),
				st.outcome, coalesce(st.ev_digest, (SELECT es.artifact_digest FROM configpub.config_snapshot es
					WHERE es.snapshot_id = st.ev_snapshot), ''), s.artifact_digest
			FROM st JOIN configpub.config_snapshot s ON s.snapshot_id = st.snapshot_id
			WHERE st.state <> 'RETIRED' AND st.divergent ORDER BY st.host, st.service_id LIMIT ` + fmt.Sprint(listed) + `)`
}

// LeaseMoments returns, per environment, the next moment after now at
// which one of its leases passes a point the pages show: its refresh
// point, its end, or the start of the lease horizon before its end (for a
// lease longer than the horizon). An environment with none is absent.
func (r *reader) LeaseMoments(ctx context.Context, now time.Time) (map[string]time.Time, error) {
	rows, err := r.q.Query(ctx, `SELECT env_tag, min(least(
			CASE WHEN lease_refresh_after > $1 THEN lease_refresh_after END,
			CASE WHEN lease_expires_at > $1 THEN lease_expires_at END,
			CASE WHEN lease_expires_at - lease_valid_from > $2 - $1 AND lease_expires_at - ($2 - $1) > $1
				THEN lease_expires_at - ($2 - $1) END))
		FROM configpub.current_pointer GROUP BY env_tag`, now, now.Add(r.leaseHorizon))
	if err != nil {
		return nil, fmt.Errorf("lease moments: %w", err)
	}
	out := map[string]time.Time{}
	for rows.Next() {
		var env string
		var t *time.Time
		if err := rows.Scan(&env, &t); err != nil {
			return nil, fmt.Errorf("lease moments: %w", err)
		}
		if t != nil {
			out[env] = *t
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lease moments: %w", err)
	}
	return out, nil
}

// revocationsListed is how many revocations the timeline lists.
const revocationsListed = 20

// revocations reads env's newest revocationsListed revocations and
// whether there are more.
func (r *reader) revocations(ctx context.Context, env string) ([]Revocation, bool, error) {
	q := dbschema.SnapshotRevocationsSQL
	if r.f.workflow {
		q = dbschema.ViewerRevocationsSQL
	}
	rows, err := r.q.Query(ctx, q, env, revocationsListed+1)
	if err != nil {
		return nil, false, fmt.Errorf("revocations of %s: %w", env, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Revocation, error) {
		var v Revocation
		var command string
		err := row.Scan(&v.ID, &v.SnapshotID, &v.PublicationID, &v.Reason, &v.Actor, &v.RevokedAt, &command,
			&v.Host, &v.ServiceID, &v.ReleaseVersion, &v.Snapshots, &v.Current)
		v.RevokedAt = v.RevokedAt.UTC()
		return v, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("revocations of %s: %w", env, err)
	}
	if len(out) > revocationsListed {
		return out[:revocationsListed], true, nil
	}
	return out, false, nil
}

// listed bounds the rows of the overview's lists.
const listed = 10

// Environment reads one environment's overview.
func (r *reader) Environment(ctx context.Context, env string) (*Environment, error) {
	now := r.now().UTC()
	e := &Environment{EnvTag: env, ByState: []StateCount{}, Expiring: []LeaseRow{}, Divergence: []Divergence{}, UpdatedAt: now}
	var current *int64
	err := r.q.QueryRow(ctx, `SELECT (SELECT current_release_version FROM configpub.environment WHERE env_tag = $1),
			count(*), coalesce(max(release_version) FILTER (WHERE (lifecycle_state = 'STAGED' AND execution_outcome NOT IN ('NOT_APPLIED', 'INTEGRITY_ERROR'))
				OR (lifecycle_state = 'RECORDED' AND execution_outcome IN ('UNCONFIRMED', 'APPLIED'))), 0)
		FROM configpub.config_release WHERE env_tag = $1`, env).Scan(&current, &e.Releases, &e.StagedRelease)
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", env, err)
	}
	if current == nil && e.Releases == 0 {
		return nil, fmt.Errorf("environment %s: %w", env, ErrNotFound)
	}
	if current != nil {
		e.CurrentRelease = *current
	}
	if e.StagedRelease <= e.CurrentRelease {
		e.StagedRelease = 0
	}
	rows, err := r.q.Query(ctx, r.overviewSQL(), env, now, now.Add(r.leaseHorizon))
	if err != nil {
		return nil, fmt.Errorf("environment %s: targets: %w", env, err)
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var (
			kind, state, host, svc, outcome, repDigest, curDigest string
			n, expiring, divergent                                int
			refresh, expires                                      *time.Time
			rel, repRel                                           int64
		)
		if err := rows.Scan(&kind, &state, &n, &expiring, &divergent, &host, &svc, &refresh, &expires, &rel, &repRel,
			&outcome, &repDigest, &curDigest); err != nil {
			return nil, fmt.Errorf("environment %s: targets: %w", env, err)
		}
		switch kind {
		case "n":
			counts[state] = n
			e.Targets += n
			e.LeasesExpiring += expiring
			e.Divergent += divergent
		case "lease":
			e.Expiring = append(e.Expiring, LeaseRow{Host: host, ServiceID: svc, RefreshAfter: refresh.UTC(), ExpiresAt: expires.UTC()})
		case "div":
			e.Divergence = append(e.Divergence, Divergence{Host: host, ServiceID: svc, CurrentRelease: rel,
				ReportedRelease: repRel, Outcome: outcome, ReportedDigest: repDigest, CurrentDigest: curDigest})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("environment %s: targets: %w", env, err)
	}
	for _, s := range stateOrder {
		if counts[s] > 0 {
			e.ByState = append(e.ByState, StateCount{State: s, Count: counts[s]})
		}
	}
	return e, nil
}

// timelinePage is how many releases one timeline page shows.
const timelinePage = 10

// Timeline reads env's releases newest first, at most timelinePage of them
// below before (0 = from the newest), with the journal events of the page.
func (r *reader) Timeline(ctx context.Context, env string, before int64) (*Timeline, error) {
	t := &Timeline{EnvTag: env, Releases: []Release{}, Events: []JournalEvent{}, Revocations: []Revocation{}}
	var current *int64
	if err := r.q.QueryRow(ctx, `SELECT current_release_version FROM configpub.environment WHERE env_tag = $1`, env).
		Scan(&current); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("timeline %s: %w", env, err)
	}
	if current != nil {
		t.CurrentRelease = *current
	}
	rels, err := r.releases(ctx, env, before, timelinePage+1, t.CurrentRelease)
	if err != nil {
		return nil, err
	}
	if len(rels) == 0 && before == 0 {
		return nil, fmt.Errorf("timeline %s: %w", env, ErrNotFound)
	}
	if len(rels) > timelinePage {
		rels = rels[:timelinePage]
		t.Older = rels[len(rels)-1].Version
	}
	t.Releases = rels
	if before != 0 {
		// The page above: the timelinePage releases after this page's
		// newest (the first page when none is newer than those).
		var newest int64
		if err := r.q.QueryRow(ctx, `SELECT coalesce(max(release_version), 0) FROM configpub.config_release WHERE env_tag = $1`, env).
			Scan(&newest); err != nil {
			return nil, fmt.Errorf("timeline %s: %w", env, err)
		}
		top := before - 1
		if len(rels) > 0 {
			top = rels[0].Version
		}
		newer := top + timelinePage + 1
		if newer > newest {
			newer = 0
		}
		t.Newer = &newer
	}
	if len(rels) == 0 {
		return t, nil
	}
	if before == 0 {
		if t.Revocations, t.RevocationsMore, err = r.revocations(ctx, env); err != nil {
			return nil, err
		}
	}
	lo, hi := rels[len(rels)-1].Version, rels[0].Version
	if err := r.audiences(ctx, env, lo, hi, t.Releases); err != nil {
		return nil, err
	}
	t.Events, t.EventsMore, err = r.journal(ctx, env, lo, hi)
	if err != nil {
		return nil, err
	}
	return t, nil
}

const releaseCols = `release_version, base_release_version, lifecycle_state, execution_outcome, release_digest,
	definition_hash, source_commit, source_ref, actor, reviewers, reason, target_count, created_at, updated_at,
	coalesce((SELECT j2.release_version FROM configpub.config_release_journal j1
		JOIN configpub.config_release_journal j2 ON j2.command_id = j1.command_id AND j2.env_tag = j1.env_tag
			AND j2.release_version <> j1.release_version AND j2.event_kind = 'deactivate'
		WHERE j1.env_tag = r.env_tag AND j1.release_version = r.release_version AND j1.to_state = 'ACTIVE'
		ORDER BY j1.sequence DESC LIMIT 1), 0)`

// windowCols selects, for the release row alias a, the activation window
// kept with its summary: when every target of the release can be moved to
// it. Databases before that have none (NULL).
func (r *reader) windowCols(a string) string {
	if !r.f.window {
		return "NULL::timestamptz, NULL::timestamptz"
	}
	const q = `(SELECT w.%[1]s FROM configpub.release_target_summary w
		WHERE w.env_tag = %[2]s.env_tag AND w.release_version = %[2]s.release_version)`
	return fmt.Sprintf(q, "activatable_from", a) + ", " + fmt.Sprintf(q, "activatable_until", a)
}

// renewalCol selects, for the release row alias a, whether the release is
// a renewal: compiled from the same policy sources as its base release
// (configpub compile --renew), by the sources digests recorded with both.
// Releases recorded without one (before that column) are not.
func (r *reader) renewalCol(a string) string {
	if !r.f.sources {
		return "false"
	}
	return fmt.Sprintf(`(%[1]s.sources_digest <> '' AND %[1]s.sources_digest = coalesce((SELECT b.sources_digest
		FROM configpub.config_release b WHERE b.env_tag = %[1]s.env_tag AND b.release_version = %[1]s.base_release_version), ''))`, a)
}

// activatable says where now is against a release's activation window:
// "from" before it opens, "until" inside it, "ended" after it, "" when the
// window is unknown.
func activatable(now time.Time, from, until *time.Time) string {
	switch {
	case until == nil:
		return ""
	case !now.Before(*until):
		return "ended"
	case from != nil && now.Before(*from):
		return "from"
	default:
		return "until"
	}
}

// releases returns env's newest limit releases below before (0: none).
// before comes from a URL (a timeline cursor, a release number plus one)
// and may be any int64: it is compared as bigint, release_version being
// an integer column.
func (r *reader) releases(ctx context.Context, env string, before int64, limit int, current int64) ([]Release, error) {
	now := r.now()
	rows, err := r.q.Query(ctx, `SELECT `+releaseCols+`, `+r.windowCols("r")+`, `+r.renewalCol("r")+` FROM configpub.config_release r
		WHERE env_tag = $1 AND ($2::bigint = 0 OR release_version < $2::bigint)
		ORDER BY release_version DESC LIMIT $3`, env, before, limit)
	if err != nil {
		return nil, fmt.Errorf("releases %s: %w", env, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Release, error) {
		var rel Release
		err := row.Scan(&rel.Version, &rel.BaseVersion, &rel.State, &rel.Outcome, &rel.ReleaseDigest,
			&rel.DefinitionHash, &rel.SourceCommit, &rel.SourceRef, &rel.Actor, &rel.Reviewers, &rel.Reason,
			&rel.TargetCount, &rel.CreatedAt, &rel.UpdatedAt, &rel.PreviousRelease,
			&rel.ActivatableFrom, &rel.ActivatableUntil, &rel.Renewal)
		rel.EnvTag = env
		rel.CreatedAt, rel.UpdatedAt = rel.CreatedAt.UTC(), rel.UpdatedAt.UTC()
		rel.Activatable = activatable(now, rel.ActivatableFrom, rel.ActivatableUntil)
		rel.Current = rel.Version == current
		if rel.Reviewers == nil {
			rel.Reviewers = []string{}
		}
		rel.Audiences = []AudienceStatus{}
		return rel, err
	})
	if err != nil {
		return nil, fmt.Errorf("releases %s: %w", env, err)
	}
	if len(out) > 0 && r.f.releaseCnt {
		versions := make([]int64, len(out))
		for i := range out {
			versions[i] = out[i].Version
		}
		rows, err := r.q.Query(ctx, dbschema.RevokedReleasesSQL, env, versions)
		if err != nil {
			return nil, fmt.Errorf("releases %s: revoked: %w", env, err)
		}
		revoked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, fmt.Errorf("releases %s: revoked: %w", env, err)
		}
		for i := range out {
			if slices.Contains(revoked, out[i].Version) {
				out[i].Activatable = "revoked"
			}
		}
	}
	return out, nil
}

// digestsListed bounds the digests shown per audience of a release.
const digestsListed = 3

// audiences fills the per-audience status of the releases lo..hi from the
// snapshots each created and the evidence about them.
func (r *reader) audiences(ctx context.Context, env string, lo, hi int64, rels []Release) error {
	receipts := "false"
	if r.f.receipts {
		receipts = "kind = 'receipt'"
	}
	rows, err := r.q.Query(ctx, `WITH ev AS (
			SELECT snapshot_id, bool_or(outcome = 'APPLIED' AND phase = 'current') AS applied,
				bool_or(outcome = 'REJECTED' AND phase = 'current') AS rejected,
				bool_or(outcome = 'READY' AND phase = 'candidate') AS ready,
				bool_or(outcome = 'REJECTED' AND phase = 'candidate') AS cand_rejected
			FROM configpub.runtime_evidence WHERE snapshot_id IN (SELECT snapshot_id FROM configpub.config_snapshot
				WHERE env_tag = $1 AND release_version BETWEEN $2 AND $3) AND `+receipts+`
			GROUP BY snapshot_id)
		SELECT s.release_version, s.audience, count(*),
			count(*) FILTER (WHERE ev.applied), count(*) FILTER (WHERE ev.rejected),
			count(*) FILTER (WHERE ev.ready), count(*) FILTER (WHERE ev.cand_rejected),
			bool_and(s.validation_state = 'VALID'),
			array(SELECT d.artifact_digest FROM configpub.config_snapshot d WHERE d.env_tag = $1
				AND d.release_version = s.release_version AND d.audience = s.audience
				ORDER BY d.host, d.service_id LIMIT `+fmt.Sprint(digestsListed)+`)
		FROM configpub.config_snapshot s LEFT JOIN ev ON ev.snapshot_id = s.snapshot_id
		WHERE s.env_tag = $1 AND s.release_version BETWEEN $2 AND $3
		GROUP BY 1, 2 ORDER BY 1, 2`, env, lo, hi)
	if err != nil {
		return fmt.Errorf("timeline %s: snapshots: %w", env, err)
	}
	defer rows.Close()
	byVersion := map[int64]*Release{}
	for i := range rels {
		byVersion[rels[i].Version] = &rels[i]
		rels[i].PolicyState = "VALIDATED"
	}
	for rows.Next() {
		var v int64
		var a AudienceStatus
		var valid bool
		if err := rows.Scan(&v, &a.Audience, &a.Targets, &a.Applied, &a.Rejected, &a.Ready, &a.CandidateRejected, &valid, &a.Digests); err != nil {
			return fmt.Errorf("timeline %s: snapshots: %w", env, err)
		}
		rel := byVersion[v]
		if rel == nil {
			continue
		}
		if !valid {
			rel.PolicyState = "INVALID"
		}
		a.More = a.Targets - len(a.Digests)
		switch {
		case a.Rejected > 0:
			a.Status = StateRejected
		case a.Applied == a.Targets:
			a.Status = StateApplied
		case rel.State == "RECORDED" && rel.Outcome == "NOT_REQUESTED":
			a.Status = "RECORDED" // recorded without activation (a release promote caught up)
		case rel.State == "RECORDED" || rel.State == "STAGED":
			a.Status = "STAGED"
		default:
			a.Status = StatePublished
		}
		rel.Audiences = append(rel.Audiences, a)
	}
	return rows.Err()
}

// journalListed bounds the journal events a page lists: every lease
// resignation and epoch raise journals an event per release it re-signs,
// so a release's events grow for as long as it is current.
const journalListed = 100

// journal reads the newest journal events of releases lo..hi, newest
// first, at most journalListed, and how many older ones it left out.
func (r *reader) journal(ctx context.Context, env string, lo, hi int64) ([]JournalEvent, int, error) {
	limit := r.journalListed
	rows, err := r.q.Query(ctx, `SELECT release_version, sequence, event_kind, coalesce(from_state, ''), to_state,
			to_outcome, actor, reason, recorded_at
		FROM configpub.config_release_journal WHERE env_tag = $1 AND release_version BETWEEN $2 AND $3
		ORDER BY recorded_at DESC, release_version DESC, sequence DESC LIMIT $4`, env, lo, hi, limit+1)
	if err != nil {
		return nil, 0, fmt.Errorf("journal %s: %w", env, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (JournalEvent, error) {
		var j JournalEvent
		err := row.Scan(&j.Release, &j.Sequence, &j.Kind, &j.FromState, &j.ToState, &j.ToOutcome, &j.Actor, &j.Reason, &j.RecordedAt)
		j.RecordedAt = j.RecordedAt.UTC()
		return j, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("journal %s: %w", env, err)
	}
	if out == nil {
		out = []JournalEvent{}
	}
	if len(out) <= limit {
		return out, 0, nil
	}
	var total int
	if err := r.q.QueryRow(ctx, `SELECT count(*) FROM configpub.config_release_journal
		WHERE env_tag = $1 AND release_version BETWEEN $2 AND $3`, env, lo, hi).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("journal %s: %w", env, err)
	}
	return out[:limit], total - limit, nil
}
