package promoter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/sqlstate"
)

// ActivationResult is the recorded result of a pointer-moving command. A
// replay returns the same value with Replayed set.
type ActivationResult struct {
	CommandID       string    `json:"commandId"`
	Action          string    `json:"action"` // promote, activate, rollback
	EnvTag          string    `json:"envTag"`
	ReleaseVersion  int64     `json:"releaseVersion"`
	PreviousRelease int64     `json:"previousRelease"` // 0 = none
	Moved           int       `json:"moved"`           // pointers moved (one manifest, one pointer_move each)
	Unchanged       int       `json:"unchanged"`       // targets already at the release's snapshot
	Retired         int       `json:"retired"`         // identities the release does not contain, retired
	Outcome         string    `json:"outcome"`         // APPLIED
	ActivatedAt     time.Time `json:"activatedAt"`
	// PreviousActivatableUntil is the end of the previous release's
	// activation window (the earliest end of its snapshots' windows): until
	// then a rollback, or an activation, can move every target back to it;
	// after it, one is refused for any target that would move. Nil when
	// there is no previous release or its window is unknown.
	PreviousActivatableUntil *time.Time `json:"previousActivatableUntil,omitempty"`
	Replayed                 bool       `json:"-"`
	// On a replay: the release's lifecycle state now and the environment's
	// active release now (a replayed promotion of a release rolled back
	// since reports ROLLED_BACK and the release that is active; nothing
	// moves).
	StateNow      string `json:"-"`
	ActiveRelease int64  `json:"-"`
}

// intentState is what the intent transaction decided.
type intentState int

const (
	intentNew      intentState = iota // intent recorded now: activate
	intentContinue                    // the same command's intent exists, still UNCONFIRMED: activate
	intentReplay                      // the command is APPLIED: replay its result
)

// RecordAndActivate records a compiled release and activates it: the intent
// transaction checks the command ledger (same UUID and hash: replay or
// complete; same UUID, other hash: ErrConflict), compare-and-swaps the
// environment's current release against in.BaseReleaseVersion (*CASError),
// stores artifacts and immutable snapshots (identical content-addressed rows
// are kept, a different row under the same key is ErrIntegrity or
// ErrIdentityMismatch), the release (definition = in.ManifestBytes), its
// targets and one journal row; the activation transaction then moves every
// changed pointer (see Activate). ErrUnconfirmed: re-run the same input, or
// Reconcile.
func (s *Store) RecordAndActivate(ctx context.Context, in ReleaseInput) (*ActivationResult, error) {
	res, err := s.recordAndActivate(ctx, &in)
	s.emitMove(ctx, ActionPromote, in.EnvTag, in.ReleaseVersion, in.Actor, in.Reason, res, err)
	if err != nil {
		return nil, fmt.Errorf("promote %s release %d (command %s): %w", in.EnvTag, in.ReleaseVersion, in.CommandID, err)
	}
	return res, nil
}

func (s *Store) recordAndActivate(ctx context.Context, in *ReleaseInput) (*ActivationResult, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := s.readyToSign(ctx); err != nil {
		return nil, err
	}
	cmd := command{ID: in.CommandID, Hash: in.commandHash(), Action: ActionPromote, EnvTag: in.EnvTag, Release: in.ReleaseVersion}
	if res, ok, err := s.replay(ctx, cmd); err != nil || ok {
		return res, err
	}
	if err := in.verifyArtifacts(); err != nil {
		return nil, err
	}
	// Sign the manifests the activation will most likely need while the
	// intent transaction runs.
	preCtx, cancelPre := context.WithCancel(ctx)
	defer cancelPre()
	preDone := make(chan *presigned, 1)
	go func() { preDone <- s.presign(preCtx, in) }()
	var state intentState
	var recorded *ActivationResult
	asked := in.Reason
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		var err error
		in.Reason = asked // a retried transaction settles it again
		state, recorded, err = s.recordIntent(ctx, tx, in, cmd)
		return err
	})
	if err != nil {
		in.Reason = asked
		cancelPre()
		<-preDone
		return nil, err
	}
	if state == intentReplay {
		cancelPre()
		<-preDone
		return recorded, s.describeReplay(ctx, recorded)
	}
	return s.activate(ctx, activation{
		cmd: cmd, actor: in.Actor, reason: in.Reason, reviewers: in.Reviewers, pre: <-preDone,
	})
}

// replay is the read-only fast path: an APPLIED command with the same hash
// returns its recorded result.
func (s *Store) replay(ctx context.Context, want command) (*ActivationResult, bool, error) {
	got, err := loadCommand(ctx, s.pool, want.ID)
	if err != nil {
		if isNotFound(err) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if err := got.matches(want); err != nil {
		return nil, false, err
	}
	if got.Outcome != OutcomeApplied {
		return nil, false, nil
	}
	res, err := decodeResult(got)
	if err == nil {
		err = s.describeReplay(ctx, res)
	}
	return res, err == nil, err
}

// describeReplay fills the replayed result's StateNow and ActiveRelease
// from the store.
func (s *Store) describeReplay(ctx context.Context, res *ActivationResult) error {
	err := s.pool.QueryRow(ctx, `SELECT r.lifecycle_state, coalesce(e.current_release_version, 0)
		FROM configpub.config_release r JOIN configpub.environment e ON e.env_tag = r.env_tag
		WHERE r.env_tag = $1 AND r.release_version = $2`, res.EnvTag, res.ReleaseVersion).Scan(&res.StateNow, &res.ActiveRelease)
	if err != nil {
		return dbErr(fmt.Sprintf("read release %s/%d", res.EnvTag, res.ReleaseVersion), err)
	}
	return nil
}

func decodeResult(c *command) (*ActivationResult, error) {
	var res ActivationResult
	if err := json.Unmarshal(c.Result, &res); err != nil {
		return nil, fmt.Errorf("command %s: recorded result: %v: %w", c.ID, err, ErrIntegrity)
	}
	res.Replayed = true
	return &res, nil
}

// resumePrior interprets the earlier record of a command claimed again: an
// APPLIED command replays its result, an UNCONFIRMED intent is continued,
// and NOT_APPLIED (definitely did not happen) returns retry=true so that the
// caller starts the intent over under the same command.
func resumePrior(prior *command) (state intentState, res *ActivationResult, retry bool, err error) {
	switch prior.Outcome {
	case OutcomeApplied:
		res, err := decodeResult(prior)
		return intentReplay, res, false, err
	case OutcomeUnconfirmed:
		return intentContinue, nil, false, nil
	case OutcomeNotApplied:
		return intentNew, nil, true, nil
	default:
		return 0, nil, false, fmt.Errorf("command %s is %s: %w", prior.ID, prior.Outcome, ErrIntegrity)
	}
}

// recordIntent is the intent transaction of RecordAndActivate. Under the
// environment's lock it checks the freeze windows (freezeAtMove) before
// anything of the release is written, and sets in.Reason to the reason to
// journal.
func (s *Store) recordIntent(ctx context.Context, tx pgx.Tx, in *ReleaseInput, cmd command) (intentState, *ActivationResult, error) {
	now := s.now()
	prior, err := claimCommand(ctx, tx, cmd, in.Actor, now)
	if err != nil {
		return 0, nil, err
	}
	if prior != nil {
		state, res, retry, err := resumePrior(prior)
		if state == intentContinue && err == nil {
			// The intent decided the reason (a window broken or not).
			in.Reason, err = intentReason(ctx, tx, cmd)
		}
		if !retry {
			return state, res, err
		}
		// Definitely did not happen: retry under the same command.
		return intentNew, nil, s.retryIntent(ctx, tx, in, cmd, now)
	}
	if err := s.fault(ctx, "record:command", tx); err != nil {
		return 0, nil, err
	}
	e, err := lockEnv(ctx, tx, in.EnvTag, now)
	if err != nil {
		return 0, nil, err
	}
	if e.Pending != 0 || e.Head != in.BaseReleaseVersion {
		return 0, nil, &CASError{EnvTag: in.EnvTag, Expected: in.BaseReleaseVersion, Actual: e.Head, Active: e.Current, Pending: e.Pending, PendingCommand: e.PendingCmd}
	}
	if err := s.fault(ctx, "record:environment", tx); err != nil {
		return 0, nil, err
	}
	if in.Reason, err = s.freezeAtMove(ctx, tx, in.EnvTag, &in.Rollout, e.Current, in.Reason, in.BreakGlassReason); err != nil {
		return 0, nil, err
	}
	if err := s.recordArtifacts(ctx, tx, in); err != nil {
		return 0, nil, err
	}
	if err := s.fault(ctx, "record:artifacts", tx); err != nil {
		return 0, nil, err
	}
	if err := insertSnapshots(ctx, tx, in.Targets, s.opts.snapshotBatch); err != nil {
		return 0, nil, err
	}
	if err := s.fault(ctx, "record:snapshots", tx); err != nil {
		return 0, nil, err
	}
	if err := insertRelease(ctx, tx, in, cmd, now); err != nil {
		return 0, nil, err
	}
	if err := s.fault(ctx, "record:release", tx); err != nil {
		return 0, nil, err
	}
	if err := insertReleaseTargets(ctx, tx, in); err != nil {
		return 0, nil, err
	}
	if id, err := revokedTarget(ctx, tx, in.EnvTag, in.ReleaseVersion); err != nil {
		return 0, nil, err
	} else if id != "" {
		return 0, nil, fmt.Errorf("snapshot %s: %w", id, ErrRevoked)
	}
	if w, err := outsideWindow(ctx, tx, in.EnvTag, in.ReleaseVersion, now); err != nil {
		return 0, nil, err
	} else if w != nil {
		return 0, nil, w
	}
	if err := s.fault(ctx, "record:targets", tx); err != nil {
		return 0, nil, err
	}
	return intentNew, nil, setEnv(ctx, tx, e, e.Current, in.ReleaseVersion, cmd.ID, now)
}

// retryIntent re-opens the intent of a release whose earlier activation
// under the same command was settled NOT_APPLIED, checking the freeze
// windows again (freezeAtMove: it sets in.Reason).
func (s *Store) retryIntent(ctx context.Context, tx pgx.Tx, in *ReleaseInput, cmd command, now time.Time) error {
	e, err := lockEnv(ctx, tx, cmd.EnvTag, now)
	if err != nil {
		return err
	}
	// The release itself is recorded: it must still be the head.
	if e.Pending != 0 || e.Head != cmd.Release {
		return &CASError{EnvTag: cmd.EnvTag, Expected: in.BaseReleaseVersion, Actual: e.Head, Active: e.Current, Pending: e.Pending, PendingCommand: e.PendingCmd}
	}
	r, err := lockRelease(ctx, tx, cmd.EnvTag, cmd.Release)
	if err != nil {
		return err
	}
	if in.Reason, err = s.freezeAtMove(ctx, tx, cmd.EnvTag, &in.Rollout, e.Current, in.Reason, in.BreakGlassReason); err != nil {
		return err
	}
	actor, reason := in.Actor, in.Reason
	if w, err := outsideWindow(ctx, tx, cmd.EnvTag, cmd.Release, now); err != nil {
		return err
	} else if w != nil {
		return w
	}
	if err := mutate(ctx, tx, r, event{Kind: "retry-intent", ToState: r.State, ToOutcome: OutcomeUnconfirmed,
		CommandID: cmd.ID, Hash: cmd.Hash, Actor: actor, Reason: reason, RecordedAt: now}); err != nil {
		return err
	}
	if err := settleCommand(ctx, tx, cmd.ID, OutcomeUnconfirmed, nil, now); err != nil {
		return err
	}
	return setEnv(ctx, tx, e, e.Current, cmd.Release, cmd.ID, now)
}

// snapshotColumns are compared when a snapshot id already exists.
const snapshotCompare = `(s.host, s.service_id, s.env_tag, s.audience, s.subject_kind, s.subject_name,
	s.publication_id, s.policy_snapshot_id, s.policy_version, s.release_version, s.artifact_digest,
	s.content_digest, s.policy_digest, s.property_set_digest, s.schema_version, s.compatibility_generation,
	s.revocation_epoch, s.source_event_sequence, s.created_at)
	IS DISTINCT FROM
	(i.host, i.service_id, i.env_tag, i.audience, i.subject_kind, i.subject_name,
	i.publication_id::uuid, i.policy_snapshot_id::uuid, i.policy_version, i.release_version, i.artifact_digest,
	i.content_digest, i.policy_digest, i.property_set_digest, i.schema_version, i.compatibility_generation,
	i.revocation_epoch, i.source_event_sequence, i.created_at)
	OR (s.valid_from IS NOT NULL AND (s.valid_from, s.expires_at) IS DISTINCT FROM (i.valid_from, i.expires_at))`

// defaultSnapshotBatch is how many snapshots one statement records: about
// 2 KB each encoded (digests, ids, the OCI reference and signature, the
// input digests), so a statement of a few MB.
const defaultSnapshotBatch = 5000

// insertSnapshots records the snapshots of ts, batch targets per statement
// (all inside tx): a release of 100,000 targets is not one statement of
// 27 arrays of 100,000 values each, so the memory it takes to encode does
// not grow with the release.
func insertSnapshots(ctx context.Context, tx pgx.Tx, ts []Target, batch int) error {
	for len(ts) > 0 {
		n := min(batch, len(ts))
		if err := insertSnapshotBatch(ctx, tx, ts[:n]); err != nil {
			return err
		}
		ts = ts[n:]
	}
	return nil
}

func insertSnapshotBatch(ctx context.Context, tx pgx.Tx, ts []Target) error {
	n := len(ts)
	var (
		ids, hosts, svcs, envs, auds, sk, sn, pubs, pols = mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n)
		arts, conts, pds, psds, profiles, ociRefs        = mk(n), mk(n), mk(n), mk(n), mk(n), mk(n)
		ociDigs, ociSigs, inputs                         = mk(n), mk(n), mk(n)
		polVers, relVers, compat, epochs, seqs           = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		schemas                                          = make([]int32, n)
		created, validFrom, expiresAt                    = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
	)
	for i := range ts {
		t := &ts[i]
		ids[i], hosts[i], svcs[i], envs[i], auds[i], sk[i], sn[i] = t.SnapshotID, t.Host, t.ServiceID, t.EnvTag, t.Audience, t.SubjectKind, t.SubjectName
		pubs[i], pols[i] = t.PublicationID, t.PolicySnapshotID
		arts[i], conts[i], pds[i], psds[i] = t.ArtifactDigest, t.ContentDigest, t.PolicyDigest, t.PropertySetDigest
		profiles[i], ociRefs[i], ociDigs[i], ociSigs[i] = t.LeaseProfile, t.OCIReference, t.OCIManifestDigest, t.OCISignature
		polVers[i], relVers[i], compat[i], epochs[i], seqs[i] = t.PolicyVersion, t.ReleaseVersion, t.CompatibilityGeneration, t.RevocationEpoch, t.SourceEventSequence
		schemas[i] = int32(t.schemaVersion())
		created[i], validFrom[i], expiresAt[i] = t.CreatedAt.UTC(), t.ValidFrom.UTC(), t.ExpiresAt.UTC()
		b, err := json.Marshal(t.InputDigests)
		if err != nil {
			return fmt.Errorf("target %s: input digests: %w", t.Identity(), err)
		}
		if t.InputDigests == nil {
			b = []byte("{}")
		}
		inputs[i] = string(b)
	}
	var badID, badHost, badSvc, badEnv string
	err := tx.QueryRow(ctx, `WITH i AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
				$8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::text[], $15::text[],
				$16::int[], $17::bigint[], $18::bigint[], $19::bigint[], $20::text[], $21::text[], $22::text[],
				$23::text[], $24::text[], $25::timestamptz[], $26::timestamptz[], $27::timestamptz[])
			AS x(snapshot_id, host, service_id, env_tag, audience, subject_kind, subject_name,
				publication_id, policy_snapshot_id, policy_version, release_version, artifact_digest, content_digest,
				policy_digest, property_set_digest, schema_version, compatibility_generation, revocation_epoch,
				source_event_sequence, lease_profile, input_digests, oci_reference, oci_manifest_digest,
				oci_signature, created_at, valid_from, expires_at)
		), ins AS (
			INSERT INTO configpub.config_snapshot (snapshot_id, host, service_id, env_tag, audience, subject_kind,
				subject_name, publication_id, policy_snapshot_id, policy_version, release_version, artifact_digest,
				content_digest, policy_digest, property_set_digest, schema_version, compatibility_generation,
				revocation_epoch, source_event_sequence, lease_profile, input_digests, oci_reference,
				oci_manifest_digest, oci_signature, created_at, valid_from, expires_at)
			SELECT snapshot_id::uuid, host, service_id, env_tag, audience, subject_kind, subject_name,
				publication_id::uuid, policy_snapshot_id::uuid, policy_version, release_version, artifact_digest,
				content_digest, policy_digest, property_set_digest, schema_version, compatibility_generation,
				revocation_epoch, source_event_sequence, lease_profile, input_digests::jsonb, oci_reference,
				oci_manifest_digest, oci_signature, created_at, valid_from, expires_at
			FROM i
			ON CONFLICT (snapshot_id) DO NOTHING
		)
		SELECT s.snapshot_id::text, s.host, s.service_id, s.env_tag
		FROM i JOIN configpub.config_snapshot s ON s.snapshot_id = i.snapshot_id::uuid
		WHERE `+snapshotCompare+` LIMIT 1`,
		ids, hosts, svcs, envs, auds, sk, sn, pubs, pols, polVers, relVers, arts, conts, pds, psds,
		schemas, compat, epochs, seqs, profiles, inputs, ociRefs, ociDigs, ociSigs, created, validFrom, expiresAt).
		Scan(&badID, &badHost, &badSvc, &badEnv)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstate.ForeignKeyViolation && pgErr.ConstraintName == "config_snapshot_artifact_digest_fkey" {
		// Checked as stored, then gone: collected in between.
		return fmt.Errorf("insert snapshots: %w: an artifact of this release was deleted while it recorded (by configpub db gc with a --min-age shorter than the promotion?); nothing was recorded: run the promotion again, which stores it again: %w", ErrConflict, err)
	}
	if err != nil {
		return dbErr("insert snapshots", err)
	}
	for i := range ts {
		t := &ts[i]
		if t.SnapshotID != badID {
			continue
		}
		if t.Host != badHost || t.ServiceID != badSvc || t.EnvTag != badEnv {
			return fmt.Errorf("snapshot %s belongs to %s/%s/%s, not %s: %w", badID, badHost, badSvc, badEnv, t.Identity(), ErrIdentityMismatch)
		}
	}
	return fmt.Errorf("snapshot %s is stored with different content: %w", badID, ErrIntegrity)
}

func mk(n int) []string { return make([]string, n) }

// sourcesColumn reports whether the database records releases' sources
// digests (config_release.sources_digest): a binary ahead of its migration
// records none.
func sourcesColumn(ctx context.Context, q querier) (bool, error) {
	var has bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
		WHERE attrelid = 'configpub.config_release'::regclass AND attname = 'sources_digest' AND NOT attisdropped)`).Scan(&has)
	if err != nil {
		return false, dbErr("look up the release's sources digest column", err)
	}
	return has, nil
}

func insertRelease(ctx context.Context, tx pgx.Tx, in *ReleaseInput, cmd command, now time.Time) error {
	changed := 0
	for i := range in.Targets {
		if in.Targets[i].Changed {
			changed++
		}
	}
	reviewers := in.Reviewers
	if reviewers == nil {
		reviewers = []string{}
	}
	rollout, err := json.Marshal(in.Rollout)
	if err != nil {
		return fmt.Errorf("encode rollout policy: %w", err)
	}
	// The sources digest is a column of its own (migration 25), written
	// only where it exists.
	sourcesCol, sourcesVal := "", ""
	args := []any{in.EnvTag, in.ReleaseVersion, in.BaseReleaseVersion, in.ManifestBytes, in.ReleaseDigest,
		in.SourceCommit, in.SourceRef, in.Actor, reviewers, in.Reason, len(in.Targets), cmd.ID, now, rollout}
	if in.SourcesDigest != "" {
		has, err := sourcesColumn(ctx, tx)
		if err != nil {
			return err
		}
		if has {
			sourcesCol, sourcesVal = ", sources_digest", ", $15"
			args = append(args, in.SourcesDigest)
		}
	}
	_, err = tx.Exec(ctx, `INSERT INTO configpub.config_release (env_tag, release_version, base_release_version,
		row_revision, lifecycle_state, execution_outcome, definition, definition_hash, release_digest,
		source_commit, source_ref, actor, reviewers, reason, target_count, command_id, last_command_id,
		created_at, updated_at, rollout`+sourcesCol+`)
		VALUES ($1, $2, $3, 1, 'RECORDED', 'UNCONFIRMED', $4, 'sha256:' || encode(sha256($4), 'hex'), $5,
		$6, $7, $8, $9, $10, $11, $12::text::uuid, $12::text::uuid, $13, $13, $14`+sourcesVal+`)`, args...)
	if err != nil {
		return dbErr(fmt.Sprintf("insert release %s/%d", in.EnvTag, in.ReleaseVersion), err)
	}
	r := &release{EnvTag: in.EnvTag, Version: in.ReleaseVersion, Revision: 1, State: StateRecorded, Outcome: OutcomeUnconfirmed, LastCmd: cmd.ID}
	return journal(ctx, tx, r, nil, event{Kind: "record", CommandID: cmd.ID, Hash: cmd.Hash, Actor: in.Actor,
		Reason: in.Reason, RecordedAt: now, Evidence: map[string]any{
			"baseReleaseVersion": in.BaseReleaseVersion, "sourceCommit": in.SourceCommit, "sourceRef": in.SourceRef,
			"releaseDigest": in.ReleaseDigest, "targets": len(in.Targets), "changed": changed,
		}})
}

func insertReleaseTargets(ctx context.Context, tx pgx.Tx, in *ReleaseInput) error {
	n := len(in.Targets)
	hosts, svcs, ids, profiles := mk(n), mk(n), mk(n), mk(n)
	changed := make([]bool, n)
	refresh, expires := make([]int64, n), make([]int64, n)
	for i := range in.Targets {
		t := &in.Targets[i]
		hosts[i], svcs[i], ids[i], profiles[i], changed[i] = t.Host, t.ServiceID, t.SnapshotID, t.LeaseProfile, t.Changed
		refresh[i], expires[i] = t.Lease.RefreshAfter.Milliseconds(), t.Lease.ExpiresAfter.Milliseconds()
	}
	_, err := tx.Exec(ctx, `INSERT INTO configpub.config_release_target (env_tag, release_version, host, service_id,
		snapshot_id, changed, lease_profile, refresh_after_ms, expires_after_ms)
		SELECT $1, $2, h, s, sid::uuid, c, lp, ra, ea
		FROM unnest($3::text[], $4::text[], $5::text[], $6::bool[], $7::text[], $8::bigint[], $9::bigint[])
		AS x(h, s, sid, c, lp, ra, ea)`,
		in.EnvTag, in.ReleaseVersion, hosts, svcs, ids, changed, profiles, refresh, expires)
	if err != nil {
		return dbErr("insert release targets", err)
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
