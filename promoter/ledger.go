package promoter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Execution outcomes (config_release.execution_outcome, command.outcome).
const (
	OutcomeNotRequested   = "NOT_REQUESTED"
	OutcomeUnconfirmed    = "UNCONFIRMED"
	OutcomeApplied        = "APPLIED"
	OutcomeNotApplied     = "NOT_APPLIED"
	OutcomeIntegrityError = "INTEGRITY_ERROR"
)

// Release lifecycle states (config_release.lifecycle_state).
const (
	StateRecorded   = "RECORDED"
	StateActive     = "ACTIVE"
	StateSuperseded = "SUPERSEDED"
	StateRolledBack = "ROLLED_BACK"
	// StateStaged: recorded with its snapshots and bytes, no pointer moved.
	StateStaged = "STAGED"
	// StateFailed: a candidate was rejected; no pointer moved, never
	// activated.
	StateFailed = "FAILED"
)

// Actions recorded in the command ledger and pointer_move.
const (
	ActionPromote  = "promote"
	ActionActivate = "activate"
	ActionRollback = "rollback"
	ActionRevoke   = "revoke"
	ActionStage    = "stage"
	// ActionRecord records a release without activating or staging it
	// (Record).
	ActionRecord = "record"
)

// command is a row of the idempotency ledger.
type command struct {
	ID, Hash, Action, EnvTag string
	Release                  int64
	Outcome                  string
	Result                   []byte
}

// claimCommand inserts the command as UNCONFIRMED. It returns nil when the
// command is new, or the recorded command (a concurrent insert of the same
// UUID waits for the other transaction, then returns its row). The same UUID
// with another hash or action is ErrConflict.
func claimCommand(ctx context.Context, tx pgx.Tx, c command, actor string, now time.Time) (*command, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO configpub.command
		(command_id, command_hash, action, env_tag, release_version, outcome, actor, created_at)
		VALUES ($1::text::uuid, $2, $3, $4, nullif($5, 0), 'UNCONFIRMED', $6, $7)
		ON CONFLICT (command_id) DO NOTHING`, c.ID, c.Hash, c.Action, c.EnvTag, c.Release, actor, now)
	if err != nil {
		return nil, dbErr("record command", err)
	}
	if tag.RowsAffected() == 1 {
		return nil, nil
	}
	got, err := loadCommand(ctx, tx, c.ID)
	if err != nil {
		return nil, err
	}
	if err := got.matches(c); err != nil {
		return nil, err
	}
	return got, nil
}

// claimSingle claims a command that runs in one transaction (revoke, epoch
// raise): a new command returns false; an earlier APPLIED run of it decodes
// its recorded result into res and returns true (a replay); any other
// recorded outcome is ErrIntegrity.
func claimSingle(ctx context.Context, tx pgx.Tx, c command, actor string, now time.Time, res any) (bool, error) {
	prior, err := claimCommand(ctx, tx, c, actor, now)
	if err != nil || prior == nil {
		return false, err
	}
	if prior.Outcome != OutcomeApplied {
		return false, fmt.Errorf("command %s is %s: %w", c.ID, prior.Outcome, ErrIntegrity)
	}
	return true, decodeInto(prior, res)
}

func (got *command) matches(want command) error {
	if got.Hash != want.Hash || got.Action != want.Action || got.EnvTag != want.EnvTag {
		return fmt.Errorf("command %s was recorded as %s %s (hash %s), now %s %s (hash %s): %w",
			want.ID, got.Action, got.EnvTag, got.Hash, want.Action, want.EnvTag, want.Hash, ErrConflict)
	}
	return nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func loadCommand(ctx context.Context, q querier, id string) (*command, error) {
	c := command{ID: id}
	err := q.QueryRow(ctx, `SELECT command_hash, action, env_tag, coalesce(release_version, 0), outcome, result
		FROM configpub.command WHERE command_id = $1::text::uuid`, id).
		Scan(&c.Hash, &c.Action, &c.EnvTag, &c.Release, &c.Outcome, &c.Result)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("command %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, dbErr("read command", err)
	}
	return &c, nil
}

// settleCommand records a command's outcome and result.
func settleCommand(ctx context.Context, tx pgx.Tx, id, outcome string, result any, now time.Time) error {
	var b []byte
	if result != nil {
		var err error
		if b, err = json.Marshal(result); err != nil {
			return fmt.Errorf("encode command result: %w", err)
		}
	}
	_, err := tx.Exec(ctx, `UPDATE configpub.command SET outcome = $2, result = $3, settled_at = $4
		WHERE command_id = $1::text::uuid`, id, outcome, b, now)
	if err != nil {
		return dbErr("settle command", err)
	}
	return nil
}

// env is an environment row, locked FOR UPDATE.
type env struct {
	Tag        string
	Current    int64 // the active release (0 = none)
	Head       int64 // the latest recorded release (0 = none)
	Pending    int64
	PendingCmd string
	Revision   int64
	Epoch      int64 // the environment's revocation epoch
}

// lockEnv creates the environment row if needed and locks it: every writer
// of an environment's pointers takes this lock first.
func lockEnv(ctx context.Context, tx pgx.Tx, tag string, now time.Time) (*env, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO configpub.environment (env_tag, updated_at) VALUES ($1, $2)
		ON CONFLICT (env_tag) DO NOTHING`, tag, now); err != nil {
		return nil, dbErr("environment "+tag, err)
	}
	return lockExistingEnv(ctx, tx, tag)
}

// lockExistingEnv locks an existing environment row (ErrNotFound if there
// is none) and reads its head release.
func lockExistingEnv(ctx context.Context, tx pgx.Tx, tag string) (*env, error) {
	e := env{Tag: tag}
	err := tx.QueryRow(ctx, `SELECT coalesce(current_release_version, 0), coalesce(pending_release_version, 0),
		coalesce(pending_command_id::text, ''), row_revision, revocation_epoch
		FROM configpub.environment WHERE env_tag = $1 FOR UPDATE`, tag).
		Scan(&e.Current, &e.Pending, &e.PendingCmd, &e.Revision, &e.Epoch)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("environment %s: %w", tag, ErrNotFound)
	}
	if err != nil {
		return nil, dbErr("lock environment "+tag, err)
	}
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(release_version), 0) FROM configpub.config_release
		WHERE env_tag = $1`, tag).Scan(&e.Head); err != nil {
		return nil, dbErr("read head release of "+tag, err)
	}
	return &e, nil
}

// setEnv writes the environment's current and pending release.
func setEnv(ctx context.Context, tx pgx.Tx, e *env, current, pending int64, pendingCmd string, now time.Time) error {
	tag, err := tx.Exec(ctx, `UPDATE configpub.environment
		SET current_release_version = nullif($2, 0), pending_release_version = nullif($3, 0),
		    pending_command_id = nullif($4, '')::uuid, row_revision = row_revision + 1, updated_at = $5
		WHERE env_tag = $1 AND row_revision = $6`, e.Tag, current, pending, pendingCmd, now, e.Revision)
	if err != nil {
		return dbErr("update environment "+e.Tag, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("environment %s changed under its lock: %w", e.Tag, ErrIntegrity)
	}
	e.Current, e.Pending, e.PendingCmd = current, pending, pendingCmd
	e.Revision++
	return nil
}

// release is a config_release row's mutable part, locked FOR UPDATE.
type release struct {
	EnvTag   string
	Version  int64
	Revision int64
	State    string
	Outcome  string
	LastCmd  string
	// TargetCount is the number of targets of the release.
	TargetCount int
}

func lockRelease(ctx context.Context, tx pgx.Tx, envTag string, version int64) (*release, error) {
	r := release{EnvTag: envTag, Version: version}
	err := tx.QueryRow(ctx, `SELECT row_revision, lifecycle_state, execution_outcome, last_command_id::text, target_count
		FROM configpub.config_release WHERE env_tag = $1 AND release_version = $2 FOR UPDATE`, envTag, version).
		Scan(&r.Revision, &r.State, &r.Outcome, &r.LastCmd, &r.TargetCount)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("release %s/%d: %w", envTag, version, ErrNotFound)
	}
	if err != nil {
		return nil, dbErr(fmt.Sprintf("lock release %s/%d", envTag, version), err)
	}
	return &r, nil
}

// event is one release mutation: the row change and its journal entry.
type event struct {
	Kind       string
	ToState    string
	ToOutcome  string
	CommandID  string
	Hash       string
	Actor      string
	Reason     string
	Evidence   any
	RecordedAt time.Time
}

// mutate applies ev to r with a compare-and-swap on row_revision and
// inserts the journal row whose sequence is the resulting revision.
func mutate(ctx context.Context, tx pgx.Tx, r *release, ev event) error {
	tag, err := tx.Exec(ctx, `UPDATE configpub.config_release
		SET row_revision = row_revision + 1, lifecycle_state = $4, execution_outcome = $5,
		    last_command_id = $6::text::uuid, updated_at = $7
		WHERE env_tag = $1 AND release_version = $2 AND row_revision = $3`,
		r.EnvTag, r.Version, r.Revision, ev.ToState, ev.ToOutcome, ev.CommandID, ev.RecordedAt)
	if err != nil {
		return dbErr(fmt.Sprintf("update release %s/%d", r.EnvTag, r.Version), err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("release %s/%d: revision %d changed: %w", r.EnvTag, r.Version, r.Revision, ErrConflict)
	}
	from := *r
	r.Revision++
	r.State, r.Outcome, r.LastCmd = ev.ToState, ev.ToOutcome, ev.CommandID
	return journal(ctx, tx, r, &from, ev)
}

// journal inserts the journal row for r's current revision.
func journal(ctx context.Context, tx pgx.Tx, r, from *release, ev event) error {
	var fromState, fromOutcome *string
	if from != nil {
		fromState, fromOutcome = &from.State, &from.Outcome
	}
	evidence := []byte("{}")
	if ev.Evidence != nil {
		var err error
		if evidence, err = json.Marshal(ev.Evidence); err != nil {
			return fmt.Errorf("encode journal evidence: %w", err)
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO configpub.config_release_journal
		(env_tag, release_version, sequence, command_id, command_hash, event_kind, from_state, to_state,
		 from_outcome, to_outcome, actor, reason, recorded_at, evidence)
		VALUES ($1, $2, $3, $4::text::uuid, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		r.EnvTag, r.Version, r.Revision, ev.CommandID, ev.Hash, ev.Kind, fromState, r.State,
		fromOutcome, r.Outcome, ev.Actor, ev.Reason, ev.RecordedAt, evidence)
	if err != nil {
		return dbErr(fmt.Sprintf("journal release %s/%d", r.EnvTag, r.Version), err)
	}
	return nil
}

func decodeInto(c *command, v any) error {
	if err := json.Unmarshal(c.Result, v); err != nil {
		return fmt.Errorf("command %s: recorded result: %v: %w", c.ID, err, ErrIntegrity)
	}
	return nil
}
