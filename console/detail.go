package console

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// changedListed bounds the changed targets a release page diffs.
const changedListed = 50

// inputsListed bounds the changed policy sources a release page lists (by
// path); the first release of 100,000 targets changes more than 100,000.
const inputsListed = 200

// Diff bases of a release page: the release it was compiled on, or the
// environment's current release ("what changes if I activate or roll back
// to this").
const (
	AgainstBase    = "base"
	AgainstCurrent = "current"
)

// ReleaseDetail reads release v of env with its journal and diff against
// its base release or, with against AgainstCurrent, against env's current
// release, listing the changed targets from offset from on (at most
// changedListed of them).
func (r *reader) ReleaseDetail(ctx context.Context, env string, v int64, from int, against string) (*ReleaseDetail, error) {
	return r.ReleaseDetailOf(ctx, env, v, DiffQuery{From: from, Against: against})
}

// DiffQuery selects the part of a release's diff a page shows: the changed
// targets from offset From on, against the base release or the current one
// (Against), only those of one audience and of the hosts starting with Host
// when they are set.
type DiffQuery struct {
	From     int
	Against  string
	Audience string
	Host     string
}

// ReleaseDetailOf reads release v of env with its journal and the part of
// its diff q selects.
func (r *reader) ReleaseDetailOf(ctx context.Context, env string, v int64, q DiffQuery) (*ReleaseDetail, error) {
	from, against := q.From, q.Against
	var current int64
	_ = r.q.QueryRow(ctx, `SELECT coalesce(current_release_version, 0) FROM configpub.environment WHERE env_tag = $1`, env).Scan(&current)
	rels, err := r.releases(ctx, env, v+1, 1, current)
	if err != nil {
		return nil, err
	}
	if len(rels) == 0 || rels[0].Version != v {
		return nil, fmt.Errorf("release %s/%d: %w", env, v, ErrNotFound)
	}
	d := &ReleaseDetail{Release: rels[0], Inputs: []InputChange{}, Changed: []TargetDiff{}, Retired: []Identity{}, ChangedFrom: from,
		Against: AgainstBase, AgainstRelease: rels[0].BaseVersion, CurrentRelease: current}
	if against == AgainstCurrent {
		d.Against, d.AgainstRelease = AgainstCurrent, current
	}
	d.FilterAudience, d.FilterHost = q.Audience, q.Host
	if from > 0 {
		prev := max(0, from-changedListed)
		d.ChangedPrev = &prev
	}
	one := []Release{d.Release}
	if err := r.audiences(ctx, env, v, v, one); err != nil {
		return nil, err
	}
	d.Release = one[0]
	if d.Journal, d.JournalMore, err = r.journal(ctx, env, v, v); err != nil {
		return nil, err
	}
	var def, baseDef []byte
	if err := r.q.QueryRow(ctx, `SELECT r.definition, coalesce(b.definition, ''::bytea)
		FROM configpub.config_release r LEFT JOIN configpub.config_release b
			ON b.env_tag = r.env_tag AND b.release_version = $3
		WHERE r.env_tag = $1 AND r.release_version = $2`, env, v, d.AgainstRelease).Scan(&def, &baseDef); err != nil {
		return nil, fmt.Errorf("release %s/%d: definition: %w", env, v, err)
	}
	d.Inputs = inputChanges(baseDef, def)
	d.InputsTotal = len(d.Inputs)
	d.Inputs = d.Inputs[:min(len(d.Inputs), inputsListed)]
	if d.Workflows, d.WorkflowsTotal, err = r.workflowViews(ctx, env, v); err != nil {
		return nil, err
	}
	d.CommitURL, d.PullRequestURL = links(r.repository, d.SourceCommit, d.SourceRef)
	if err := r.changedTargets(ctx, d); err != nil {
		return nil, err
	}
	d.DiffMode = "metadata"
	if r.showValues {
		if err := r.valueDiffs(ctx, d); err != nil {
			return nil, err
		}
		d.DiffMode = "values"
	}
	return d, nil
}

// changedTargets lists the targets whose snapshot differs from the base
// release's (or, against the current release, from the current release's
// mapping), and the identities of the base (or current) release the
// release does not contain.
func (r *reader) changedTargets(ctx context.Context, d *ReleaseDetail) error {
	st := diffStatements(d)
	args, filter := st.args, st.filter
	// The counts against the base were computed once, when the release's
	// mapping was recorded (release_target_summary); a database without
	// them, a diff against the current release, or a filtered one counts.
	retired := -1 // how many of the base's identities the release retired; < 0: unknown
	counted := false
	if r.f.summary && d.Against == AgainstBase && filter == "" {
		var kept int
		err := r.q.QueryRow(ctx, `SELECT x.changed, x.kept, coalesce(b.targets, -1)
			FROM configpub.release_target_summary x LEFT JOIN configpub.release_target_summary b
				ON b.env_tag = x.env_tag AND b.release_version = $3
			WHERE x.env_tag = $1 AND x.release_version = $2`, d.EnvTag, d.Version, d.AgainstRelease).Scan(&d.ChangedTotal, &kept, &retired)
		switch {
		case err == nil:
			retired -= kept
			counted = true
		case errors.Is(err, pgx.ErrNoRows):
			retired = -1
		default:
			return fmt.Errorf("release %s/%d: targets: %w", d.EnvTag, d.Version, err)
		}
	}
	if !counted {
		if err := r.q.QueryRow(ctx, st.count, args...).Scan(&d.ChangedTotal); err != nil {
			return fmt.Errorf("release %s/%d: targets: %w", d.EnvTag, d.Version, err)
		}
	}
	rows, err := r.q.Query(ctx, st.list, append(args, changedListed, d.ChangedFrom)...)
	if err != nil {
		return fmt.Errorf("release %s/%d: targets: %w", d.EnvTag, d.Version, err)
	}
	for rows.Next() {
		var td TargetDiff
		if err := rows.Scan(&td.Host, &td.ServiceID, &td.Audience, &td.OldSnapshotID, &td.NewSnapshotID,
			&td.OldDigest, &td.NewDigest, &td.OldPolicy, &td.NewPolicy); err != nil {
			rows.Close()
			return fmt.Errorf("release %s/%d: targets: %w", d.EnvTag, d.Version, err)
		}
		d.Changed = append(d.Changed, td)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("release %s/%d: targets: %w", d.EnvTag, d.Version, err)
	}
	if next := d.ChangedFrom + len(d.Changed); len(d.Changed) > 0 && next < d.ChangedTotal {
		d.ChangedNext = next
	}
	if d.AgainstRelease == 0 || d.AgainstRelease == d.Version || retired == 0 {
		return nil
	}
	if filter == "" {
		rows, err = r.q.Query(ctx, `(SELECT host, service_id FROM configpub.config_release_target WHERE env_tag = $1 AND release_version = $3
			EXCEPT SELECT host, service_id FROM configpub.config_release_target WHERE env_tag = $1 AND release_version = $2)
			ORDER BY 1, 2 LIMIT $4`, d.EnvTag, d.Version, d.AgainstRelease, changedListed)
	} else {
		// The filters apply to the audience and host of the snapshot the
		// identity had.
		rows, err = r.q.Query(ctx, st.retired, append(args, changedListed)...)
	}
	if err != nil {
		return fmt.Errorf("release %s/%d: retired targets: %w", d.EnvTag, d.Version, err)
	}
	d.Retired, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Identity])
	if err != nil {
		return fmt.Errorf("release %s/%d: retired targets: %w", d.EnvTag, d.Version, err)
	}
	if d.Retired == nil {
		d.Retired = []Identity{}
	}
	return nil
}

// diffSQL holds the statements of a release diff: count and list the
// changed targets (list takes two more arguments: LIMIT and OFFSET), and
// list the retired identities under the filters (one more: LIMIT).
type diffSQL struct {
	count, list, retired string
	filter               string // the filters' conditions; "" when none is set
	args                 []any
}

// diffStatements builds d's diff statements with their arguments: $1 the
// environment, $2 the release, $3 the one it is compared with, then the
// audience and host filters.
func diffStatements(d *ReleaseDetail) diffSQL {
	// The snapshots the release created that are in its mapping and differ
	// from the base mapping's: counted apart, and the listed ones read in
	// the order of the config_snapshot_release_audience index, so that a
	// release of 10,000 changed targets neither sorts nor joins them all.
	const changedFromBase = `FROM configpub.config_snapshot s
		JOIN configpub.config_release_target t ON t.env_tag = s.env_tag AND t.release_version = s.release_version
			AND t.host = s.host AND t.service_id = s.service_id AND t.snapshot_id = s.snapshot_id
		WHERE s.env_tag = $1 AND s.release_version = $2 AND NOT EXISTS (SELECT 1 FROM configpub.config_release_target b
			WHERE b.env_tag = t.env_tag AND b.release_version = $3 AND b.host = t.host AND b.service_id = t.service_id
				AND b.snapshot_id = t.snapshot_id)`
	// Against the current release: every target of the mapping whose
	// snapshot is not the current mapping's, whichever release created it
	// (a rollback to an older release moves targets to snapshots its base
	// also had). The two mappings are compared first, by their primary
	// keys, in a subquery OFFSET 0 keeps apart (the host filter inside it,
	// on the mapping's key): only the changed targets are then joined to
	// their snapshots and sorted, not the whole release before the
	// unchanged ones are dropped.
	const changedFromCurrent = `FROM (SELECT t.host, t.service_id, t.snapshot_id FROM configpub.config_release_target t
			WHERE t.env_tag = $1 AND t.release_version = $2 AND NOT EXISTS (SELECT 1 FROM configpub.config_release_target b
				WHERE b.env_tag = t.env_tag AND b.release_version = $3 AND b.host = t.host AND b.service_id = t.service_id
					AND b.snapshot_id = t.snapshot_id)%s
			OFFSET 0) t
		JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
		WHERE true`
	// The audience and host filters, as parameters $4 and on.
	args := []any{d.EnvTag, d.Version, d.AgainstRelease}
	filter, retiredFilter := "", "" // retiredFilter: on the snapshot s of a retired identity
	mappingFilter := ""             // against the current release: the host filter, on the mapping's key t
	if d.FilterAudience != "" {
		args = append(args, d.FilterAudience)
		filter += fmt.Sprintf(" AND s.audience = $%d", len(args))
		retiredFilter += fmt.Sprintf(" AND s.audience = $%d", len(args))
	}
	if d.FilterHost != "" {
		// The host filter is a prefix, compared byte-wise (~>=~, ~<~:
		// whatever the database's collation): the release's part of the
		// index each statement reads (env_tag, release_version leading)
		// bounds the scan, the prefix is checked on its entries.
		args = append(args, d.FilterHost)
		lo := fmt.Sprintf("$%d::text", len(args))
		hi := ""
		if end := prefixEnd(d.FilterHost); end != "" {
			args = append(args, end)
			hi = fmt.Sprintf("$%d::text", len(args))
		}
		prefix := func(col string) string {
			c := fmt.Sprintf(" AND %s ~>=~ %s", col, lo)
			if hi != "" {
				c += fmt.Sprintf(" AND %s ~<~ %s", col, hi)
			}
			return c
		}
		// Against the current release the mapping's key (t) leads.
		if d.Against == AgainstCurrent {
			mappingFilter = prefix("t.host")
		} else {
			filter += prefix("s.host")
		}
		retiredFilter += prefix("s.host")
	}
	changedFrom := changedFromBase + filter
	if d.Against == AgainstCurrent {
		changedFrom = fmt.Sprintf(changedFromCurrent, mappingFilter) + filter
		filter += mappingFilter
	}
	page := fmt.Sprintf(" LIMIT $%d OFFSET $%d", len(args)+1, len(args)+2)
	return diffSQL{
		count: `SELECT count(*) ` + changedFrom,
		list: `WITH c AS (SELECT s.audience, s.host, s.service_id, s.snapshot_id, s.artifact_digest, s.policy_digest ` + changedFrom + `
			ORDER BY s.audience, s.host, s.service_id` + page + `)
		SELECT c.host, c.service_id, c.audience, coalesce(b.snapshot_id::text, ''), c.snapshot_id::text,
			coalesce(bs.artifact_digest, ''), c.artifact_digest, coalesce(bs.policy_digest, ''), c.policy_digest
		FROM c LEFT JOIN configpub.config_release_target b ON b.env_tag = $1 AND b.release_version = $3
			AND b.host = c.host AND b.service_id = c.service_id
		LEFT JOIN configpub.config_snapshot bs ON bs.snapshot_id = b.snapshot_id
		ORDER BY c.audience, c.host, c.service_id`,
		retired: `SELECT s.host, s.service_id FROM configpub.config_release_target b
			JOIN configpub.config_snapshot s ON s.snapshot_id = b.snapshot_id
			WHERE b.env_tag = $1 AND b.release_version = $3` + retiredFilter + ` AND NOT EXISTS (SELECT 1 FROM configpub.config_release_target t
				WHERE t.env_tag = $1 AND t.release_version = $2 AND t.host = b.host AND t.service_id = b.service_id)
			ORDER BY 1, 2` + fmt.Sprintf(" LIMIT $%d", len(args)+1),
		filter: filter,
		args:   args,
	}
}

// valueDiffs reads the artifact bytes of every listed changed target (the
// configpub_viewer_bytes grant) and compares their values.
func (r *reader) valueDiffs(ctx context.Context, d *ReleaseDetail) error {
	digests := make([]string, 0, 2*len(d.Changed))
	for _, td := range d.Changed {
		if td.OldDigest != "" {
			digests = append(digests, td.OldDigest, td.NewDigest)
		}
	}
	rows, err := r.q.Query(ctx, `SELECT artifact_digest, bytes FROM configpub.artifact WHERE artifact_digest = ANY($1)`, digests)
	if err != nil {
		return fmt.Errorf("release %s/%d: artifact bytes (is the console's login a member of configpub_viewer_bytes?): %w", d.EnvTag, d.Version, err)
	}
	body := map[string][]byte{}
	for rows.Next() {
		var dg string
		var b []byte
		if err := rows.Scan(&dg, &b); err != nil {
			rows.Close()
			return fmt.Errorf("release %s/%d: artifact bytes: %w", d.EnvTag, d.Version, err)
		}
		body[dg] = b
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("release %s/%d: artifact bytes (is the console's login a member of configpub_viewer_bytes?): %w", d.EnvTag, d.Version, err)
	}
	for i := range d.Changed {
		td := &d.Changed[i]
		if td.OldDigest == "" {
			// A new target has nothing to compare: listing its values
			// would show its whole configuration.
			continue
		}
		changes, envelope, err := diffValues(body[td.OldDigest], body[td.NewDigest])
		if err != nil {
			return fmt.Errorf("release %s/%d: %s/%s: %w", d.EnvTag, d.Version, td.Host, td.ServiceID, err)
		}
		td.Changes, td.EnvelopeChanges = changes, envelope
	}
	return nil
}

// movesListed bounds the pointer moves and evidence rows of a target page.
const movesListed = 100

const moveCols = `m.move_id, m.host, m.service_id, m.action, m.release_version, coalesce(m.previous_release_version, 0),
	m.next_snapshot_id::text, s.release_version, s.artifact_digest, s.audience, m.sequence, m.actor, m.reason, %s, m.moved_at`

func (r *reader) moveSelect() string { return fmt.Sprintf(moveCols, r.moveRetiredCol("m")) }

func scanMove(row pgx.CollectableRow) (Move, error) {
	var m Move
	err := row.Scan(&m.MoveID, &m.Host, &m.ServiceID, &m.Action, &m.Release, &m.PreviousRelease, &m.SnapshotID,
		&m.SnapshotRelease, &m.ArtifactDigest, &m.Audience, &m.Sequence, &m.Actor, &m.Reason, &m.Retired, &m.MovedAt)
	m.MovedAt = m.MovedAt.UTC()
	return m, err
}

// TargetDetail reads a target's current pointer, moves and evidence.
func (r *reader) TargetDetail(ctx context.Context, env, host, svc string) (*TargetDetail, error) {
	t := &TargetDetail{EnvTag: env, Host: host, ServiceID: svc}
	now := r.now()
	p := &Pointer{}
	var revoked bool
	err := r.q.QueryRow(ctx, `SELECT p.snapshot_id::text, s.audience, s.release_version, p.release_version, p.sequence,
			s.artifact_digest, s.content_digest, s.policy_digest, p.moved_at, p.lease_valid_from, p.lease_refresh_after,
			p.lease_expires_at, `+r.retiredAtCol("p")+`,
			EXISTS (SELECT 1 FROM configpub.revocation v WHERE v.snapshot_id = s.snapshot_id OR v.publication_id = s.publication_id)
		FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1 AND p.host = $2 AND p.service_id = $3`, env, host, svc).
		Scan(&p.SnapshotID, &p.Audience, &p.Release, &p.PointerRelease, &p.Sequence, &p.ArtifactDigest, &p.ContentDigest,
			&p.PolicyDigest, &p.MovedAt, &p.LeaseValidFrom, &p.RefreshAfter, &p.ExpiresAt, &p.RetiredAt, &revoked)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("target %s/%s/%s: %w", env, host, svc, err)
	default:
		p.MovedAt, p.LeaseValidFrom, p.RefreshAfter, p.ExpiresAt = p.MovedAt.UTC(), p.LeaseValidFrom.UTC(), p.RefreshAfter.UTC(), p.ExpiresAt.UTC()
		t.Current = p
	}
	rows, err := r.q.Query(ctx, `SELECT `+r.moveSelect()+` FROM configpub.pointer_move m
		JOIN configpub.config_snapshot s ON s.snapshot_id = m.next_snapshot_id
		WHERE m.env_tag = $1 AND m.host = $2 AND m.service_id = $3 ORDER BY m.move_id DESC LIMIT $4`, env, host, svc, movesListed)
	if err != nil {
		return nil, fmt.Errorf("target %s/%s/%s: moves: %w", env, host, svc, err)
	}
	if t.Moves, err = pgx.CollectRows(rows, scanMove); err != nil {
		return nil, fmt.Errorf("target %s/%s/%s: moves: %w", env, host, svc, err)
	}
	if t.Current == nil && len(t.Moves) == 0 {
		return nil, fmt.Errorf("target %s/%s/%s: %w", env, host, svc, ErrNotFound)
	}
	kind := "'observation'"
	if r.f.evidenceKnd {
		kind = "e.kind"
	}
	runs := "''"
	if r.f.receipts {
		runs = "coalesce(e.running_snapshot_id::text, CASE WHEN e.outcome = 'APPLIED' THEN e.snapshot_id::text END, '')"
	}
	rows, err = r.q.Query(ctx, `SELECT e.evidence_id, `+kind+`, e.outcome, e.reason, coalesce(e.snapshot_id::text, ''),
			coalesce(s.release_version, 0), e.artifact_digest, e.reported_at, `+r.receiptsOnly("e")+`, `+runs+`
		FROM configpub.runtime_evidence e LEFT JOIN configpub.config_snapshot s ON s.snapshot_id = e.snapshot_id
		WHERE e.env_tag = $1 AND e.host = $2 AND e.service_id = $3 ORDER BY e.evidence_id DESC LIMIT $4`, env, host, svc, movesListed)
	if err != nil {
		return nil, fmt.Errorf("target %s/%s/%s: evidence: %w", env, host, svc, err)
	}
	t.Evidence, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Evidence, error) {
		var e Evidence
		err := row.Scan(&e.EvidenceID, &e.Kind, &e.Outcome, &e.Reason, &e.SnapshotID, &e.SnapshotRelease, &e.ArtifactDigest, &e.ReportedAt,
			&e.currentReceipt, &e.runs)
		e.ReportedAt = e.ReportedAt.UTC()
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("target %s/%s/%s: evidence: %w", env, host, svc, err)
	}
	if t.Current != nil {
		t.Current.State = pointerState(t.Current, revoked, now, t.Evidence)
	}
	if t.Moves == nil {
		t.Moves = []Move{}
	}
	if t.Evidence == nil {
		t.Evidence = []Evidence{}
	}
	return t, nil
}

// pointerState derives a pointer's state as the overview (and configpub
// status) does, from the runtime's receipts about the current
// configuration (newest first): APPLIED when the last one, read since the
// pointer's last move, reads the runtime running the pointer's snapshot,
// REJECTED when the last rejection
// is about it and came after the move.
func pointerState(p *Pointer, revoked bool, now time.Time, ev []Evidence) string {
	var runs, rejection *Evidence
	for i := range ev {
		if !ev[i].currentReceipt {
			continue
		}
		if runs == nil {
			runs = &ev[i] // the last receipt: its runs is "" when the runtime failed closed
		}
		if rejection == nil && ev[i].Outcome == StateRejected {
			rejection = &ev[i]
		}
	}
	switch {
	case p.RetiredAt != nil:
		return StateRetired
	case revoked:
		return StateRevoked
	case !now.Before(p.ExpiresAt):
		return StateLeaseExpired
	case runs != nil && runs.runs == p.SnapshotID && !runs.ReportedAt.Before(p.MovedAt):
		return StateApplied
	case rejection != nil && rejection.SnapshotID == p.SnapshotID && !rejection.ReportedAt.Before(p.MovedAt):
		return StateRejected
	default:
		return StatePublished
	}
}

// IdentityAt answers what host/svc of env was served at at: the last
// pointer move at or before it.
func (r *reader) IdentityAt(ctx context.Context, env, host, svc string, at time.Time) (*IdentityAt, error) {
	out := &IdentityAt{EnvTag: env, Host: host, ServiceID: svc, At: at.UTC()}
	var known bool
	if err := r.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.pointer_move
		WHERE env_tag = $1 AND host = $2 AND service_id = $3)`, env, host, svc).Scan(&known); err != nil {
		return nil, fmt.Errorf("%s/%s/%s at %s: %w", env, host, svc, at.Format(time.RFC3339), err)
	}
	if !known { // never served, at any time: as the target page
		return nil, fmt.Errorf("target %s/%s/%s: %w", env, host, svc, ErrNotFound)
	}
	rows, err := r.q.Query(ctx, `SELECT `+r.moveSelect()+` FROM configpub.pointer_move m
		JOIN configpub.config_snapshot s ON s.snapshot_id = m.next_snapshot_id
		WHERE m.env_tag = $1 AND m.host = $2 AND m.service_id = $3 AND m.moved_at <= $4
		ORDER BY m.move_id DESC LIMIT 1`, env, host, svc, at)
	if err != nil {
		return nil, fmt.Errorf("%s/%s/%s at %s: %w", env, host, svc, at.Format(time.RFC3339), err)
	}
	moves, err := pgx.CollectRows(rows, scanMove)
	if err != nil {
		return nil, fmt.Errorf("%s/%s/%s at %s: %w", env, host, svc, at.Format(time.RFC3339), err)
	}
	if len(moves) == 1 {
		out.Served = &moves[0]
	}
	return out, nil
}

// envAtListed bounds the targets listed by EnvironmentAt.
const envAtListed = 200

// atListed is the time-travel page size: envAtListed unless a test set
// the reader's atPage.
func (r *reader) atListed() int {
	if r.atPage > 0 {
		return r.atPage
	}
	return envAtListed
}

// EnvironmentAt reconstructs env at at from the pointer-move journal: each
// identity's last move at or before at, counted by the release of its
// snapshot. When the schema keeps per-mapping counts it starts from the
// last activation or rollback at or before at (which left every identity
// of the environment at that release's mapping, the others retired) and
// reads only the moves after it; otherwise it scans every move before at.
// It lists a page of targets (envAtListed) from offset from, by host and service.
func (r *reader) EnvironmentAt(ctx context.Context, env string, at time.Time, from int) (*EnvironmentAt, error) {
	out := &EnvironmentAt{EnvTag: env, At: at.UTC(), ByRelease: []ReleaseCount{}, Rows: []Move{}, From: from}
	var known bool
	if err := r.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.environment WHERE env_tag = $1)`, env).Scan(&known); err != nil {
		return nil, fmt.Errorf("%s at %s: %w", env, at.Format(time.RFC3339), err)
	}
	if !known { // as the timeline
		return nil, fmt.Errorf("environment %s: %w", env, ErrNotFound)
	}
	var activated time.Time
	err := r.q.QueryRow(ctx, `SELECT j.release_version, r.release_digest, j.recorded_at FROM configpub.config_release_journal j
		JOIN configpub.config_release r ON r.env_tag = j.env_tag AND r.release_version = j.release_version
		WHERE j.env_tag = $1 AND j.to_state = 'ACTIVE' AND j.from_state IS DISTINCT FROM 'ACTIVE' AND j.recorded_at <= $2
		ORDER BY j.recorded_at DESC, j.event_id LIMIT 1`, env, at).Scan(&out.Release, &out.ReleaseDigest, &activated)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s at %s: %w", env, at.Format(time.RFC3339), err)
	}
	var rows pgx.Rows
	if r.f.releaseCnt && r.f.retired && out.Release != 0 {
		rows, err = r.q.Query(ctx, r.envAtFromActivationSQL(), env, at, r.atListed(), activated, out.Release, from)
	} else {
		rows, err = r.q.Query(ctx, r.envAtScanSQL(), env, at, r.atListed(), from)
	}
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", env, at.Format(time.RFC3339), err)
	}
	defer rows.Close()
	var rels []int64
	var ns []int
	for rows.Next() {
		var m Move
		if err := rows.Scan(&m.MoveID, &m.Host, &m.ServiceID, &m.Action, &m.Release, &m.PreviousRelease, &m.SnapshotID,
			&m.SnapshotRelease, &m.ArtifactDigest, &m.Audience, &m.Sequence, &m.Actor, &m.Reason, &m.Retired, &m.MovedAt,
			&rels, &ns); err != nil {
			return nil, fmt.Errorf("%s at %s: %w", env, at.Format(time.RFC3339), err)
		}
		m.MovedAt = m.MovedAt.UTC()
		out.Rows = append(out.Rows, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s at %s: %w", env, at.Format(time.RFC3339), err)
	}
	for i, v := range rels {
		out.ByRelease = append(out.ByRelease, ReleaseCount{Release: v, Count: ns[i]})
		out.Targets += ns[i]
	}
	if from > 0 {
		prev := max(0, from-r.atListed())
		out.Prev = &prev
	}
	out.More = max(0, out.Targets-from-len(out.Rows))
	if out.More > 0 && len(out.Rows) > 0 {
		out.Next = from + len(out.Rows)
	}
	sortReleaseCounts(out.ByRelease)
	return out, nil
}

// envAtScanSQL lists, for env $1 at $2, $3 identities' last moves from offset $4
// with the counts by snapshot release, from every move at or before $2 (in
// the order a backward scan of the pointer_move_identity_at index gives):
// only the listed rows travel.
func (r *reader) envAtScanSQL() string {
	return `WITH last AS MATERIALIZED (
			SELECT DISTINCT ON (host, service_id) move_id, host, service_id, next_snapshot_id, ` + r.moveRetiredCol("m") + ` AS retired
			FROM configpub.pointer_move m WHERE env_tag = $1 AND moved_at <= $2
			ORDER BY host DESC, service_id DESC, move_id DESC),
		counts AS MATERIALIZED (
			SELECT s.release_version AS rel, count(*)::int AS n FROM last l
			JOIN configpub.config_snapshot s ON s.snapshot_id = l.next_snapshot_id WHERE NOT l.retired GROUP BY 1),
		page AS (SELECT move_id FROM last WHERE NOT retired ORDER BY host, service_id LIMIT $3 OFFSET $4)
		SELECT ` + r.moveSelect() + `,
			(SELECT coalesce(array_agg(rel ORDER BY rel), '{}') FROM counts), (SELECT coalesce(array_agg(n ORDER BY rel), '{}') FROM counts)
		FROM page JOIN configpub.pointer_move m ON m.move_id = page.move_id
		JOIN configpub.config_snapshot s ON s.snapshot_id = m.next_snapshot_id
		ORDER BY m.host, m.service_id`
}

// envAtFromActivationSQL gives what envAtScanSQL gives from release $5's
// mapping, activated at $4 (the last activation or rollback at or before
// $2), and the moves after $4: the counts are the mapping's kept counts
// with each identity moved since taken out of its mapping release and put
// in its new snapshot's release (unless retired); the listed identities
// are $3 from offset $6 of the mapping's and the moved ones, each with its
// last move at or before $2 read from the identity index.
func (r *reader) envAtFromActivationSQL() string {
	const lastMove = `(SELECT m.move_id, m.retired FROM configpub.pointer_move m
				WHERE m.env_tag = $1 AND m.host = %[1]s.host AND m.service_id = %[1]s.service_id AND m.moved_at <= $2
				ORDER BY m.move_id DESC LIMIT 1)`
	return `WITH delta AS MATERIALIZED (
			SELECT DISTINCT ON (host, service_id) host, service_id, next_snapshot_id, retired
			FROM configpub.pointer_move WHERE env_tag = $1 AND moved_at > $4 AND moved_at <= $2
			ORDER BY host, service_id, move_id DESC),
		counts AS MATERIALIZED (
			SELECT rel, sum(n)::int AS n FROM (
				SELECT snapshot_release AS rel, targets AS n FROM configpub.release_target_release_count
				WHERE env_tag = $1 AND release_version = $5
				UNION ALL
				SELECT s.release_version, -1 FROM delta d
				JOIN configpub.config_release_target t ON t.env_tag = $1 AND t.release_version = $5
					AND t.host = d.host AND t.service_id = d.service_id
				JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
				UNION ALL
				SELECT s.release_version, 1 FROM delta d JOIN configpub.config_snapshot s ON s.snapshot_id = d.next_snapshot_id
				WHERE NOT d.retired) c
			GROUP BY rel HAVING sum(n) <> 0),
		page AS (
			(SELECT l.move_id, t.host, t.service_id FROM configpub.config_release_target t
				CROSS JOIN LATERAL ` + fmt.Sprintf(lastMove, "t") + ` l
				WHERE t.env_tag = $1 AND t.release_version = $5 AND NOT l.retired
				ORDER BY t.host, t.service_id LIMIT $3::int + $6::int)
			UNION
			(SELECT l.move_id, d.host, d.service_id FROM delta d CROSS JOIN LATERAL ` + fmt.Sprintf(lastMove, "d") + ` l
				WHERE NOT l.retired ORDER BY d.host, d.service_id LIMIT $3::int + $6::int)),
		listed AS (SELECT move_id FROM page ORDER BY host, service_id LIMIT $3 OFFSET $6)
		SELECT ` + r.moveSelect() + `,
			(SELECT coalesce(array_agg(rel ORDER BY rel), '{}') FROM counts), (SELECT coalesce(array_agg(n ORDER BY rel), '{}') FROM counts)
		FROM listed JOIN configpub.pointer_move m ON m.move_id = listed.move_id
		JOIN configpub.config_snapshot s ON s.snapshot_id = m.next_snapshot_id
		ORDER BY m.host, m.service_id`
}
