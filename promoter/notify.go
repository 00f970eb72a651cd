package promoter

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/safetext"
)

// Event kinds delivered to a Notifier.
const (
	EventStaged      = "release.staged"
	EventActivated   = "release.activated"
	EventRolledBack  = "release.rolled_back"
	EventFailed      = "release.failed"
	EventRejected    = "candidate.rejected"
	EventUnconfirmed = "outcome.unconfirmed"
	EventSettled     = "outcome.settled"
)

// Event is one release state change, rollback, rejection, unconfirmed
// outcome or settlement of one, as delivered to webhooks. It names releases and identities,
// never a configuration body.
type Event struct {
	ID              string    `json:"id"` // UUID, unique per event
	Kind            string    `json:"kind"`
	EnvTag          string    `json:"envTag"`
	Release         int64     `json:"release"`
	PreviousRelease int64     `json:"previousRelease,omitempty"`
	State           string    `json:"state,omitempty"`
	Outcome         string    `json:"outcome,omitempty"`
	Actor           string    `json:"actor,omitempty"`
	Reason          string    `json:"reason,omitempty"`
	Detail          string    `json:"detail,omitempty"`
	At              time.Time `json:"at"`
}

// Text is the one-line, Slack-compatible summary of the event. Actor,
// reason and detail come from commits and operators (a reason is often a
// pull request's title): they are escaped as Slack requires (&, <, >) and
// their control characters shown as escapes, so that they cannot ping a
// channel, post a link under a false label or break the line.
func (e *Event) Text() string {
	esc := safetext.Slack
	s := fmt.Sprintf("configpub %s: %s release %d", esc(e.Kind), esc(e.EnvTag), e.Release)
	if e.State != "" {
		s += " " + esc(e.State)
	}
	if e.PreviousRelease != 0 {
		s += fmt.Sprintf(" (from release %d)", e.PreviousRelease)
	}
	if e.Actor != "" {
		s += " by " + esc(e.Actor)
	}
	if e.Reason != "" {
		s += ": " + esc(e.Reason)
	}
	if e.Detail != "" {
		s += " — " + esc(e.Detail)
	}
	return s
}

// Notifier receives events. Notify must return promptly (deliver in the
// background, bounded): a slow or failing receiver never blocks or fails a
// promotion.
type Notifier interface {
	Notify(ctx context.Context, ev Event)
}

// emit sends ev to the configured Notifier, if any.
func (s *Store) emit(ctx context.Context, ev Event) {
	if s.opts.Notifier == nil {
		return
	}
	if ev.ID == "" {
		ev.ID = uuid.NewString()
	}
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	s.opts.Notifier.Notify(context.WithoutCancel(ctx), ev)
}

// emitMove notifies the result of a pointer-moving command: activated or
// rolled back (the event its transaction recorded), or unconfirmed.
func (s *Store) emitMove(ctx context.Context, action, envTag string, version int64, actor, reason string, res *ActivationResult, err error) {
	switch {
	case errors.Is(err, ErrUnconfirmed):
		s.emit(ctx, Event{Kind: EventUnconfirmed, EnvTag: envTag, Release: version, Outcome: OutcomeUnconfirmed,
			Actor: actor, Reason: reason, Detail: action + " outcome unknown: re-run the same command or reconcile"})
	case err != nil || res == nil || res.Replayed:
	default:
		s.emit(ctx, moveEvent(action, envTag, version, actor, reason, res))
	}
}

// moveEvent is the event of a pointer move's result: activated, or rolled
// back. Its id and time derive from the command and the move, so the event
// the activation's transaction recorded and the one sent after the commit
// are the same.
func moveEvent(action, envTag string, version int64, actor, reason string, res *ActivationResult) Event {
	if action == ActionRollback {
		return Event{ID: eventID(res.CommandID, EventRolledBack), Kind: EventRolledBack, EnvTag: envTag, Release: version,
			PreviousRelease: res.PreviousRelease, State: StateActive, Outcome: res.Outcome, Actor: actor, Reason: reason,
			Detail: fmt.Sprintf("%d pointers moved, %d retired", res.Moved, res.Retired), At: res.ActivatedAt}
	}
	return Event{ID: eventID(res.CommandID, EventActivated), Kind: EventActivated, EnvTag: envTag, Release: version,
		PreviousRelease: res.PreviousRelease, State: StateActive, Outcome: res.Outcome, Actor: actor, Reason: reason,
		Detail: fmt.Sprintf("%d pointers moved, %d unchanged, %d retired", res.Moved, res.Unchanged, res.Retired), At: res.ActivatedAt}
}

// eventID is the id of the event of kind that command caused: one command
// is one state change, so the id its transaction records is the id sent
// after the commit, and a command run again (its outcome unknown) records
// nothing twice.
func eventID(commandID, kind string) string {
	sum := sha256.Sum256([]byte("configpub/event/v1\x00" + commandID + "\x00" + kind))
	var u uuid.UUID
	copy(u[:], sum[:16])
	u[6] = u[6]&0x0f | 0x80 // version 8
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant
	return u.String()
}

// recordEvent records ev, given its id and time, in configpub.webhook_event
// inside tx, the transaction of the state change it reports, so that the
// two commit together: a process that stops after the commit, before its
// notifier recorded or sent the event, leaves it for `configpub webhook
// redeliver`, which sends an event no receiver was ever sent to every
// receiver. Nothing is recorded without a Notifier, or on a database
// before migration 26. The notifier's own recording of the same id is then
// a no-op.
func (s *Store) recordEvent(ctx context.Context, tx pgx.Tx, ev *Event) error {
	if s.opts.Notifier == nil || !s.events {
		return nil
	}
	if ev.ID == "" {
		ev.ID = uuid.NewString()
	}
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	if err := RecordEvent(ctx, tx, *ev); err != nil {
		return dbErr("record "+ev.Kind+" event", err)
	}
	return nil
}

// RecordEvent inserts ev into configpub.webhook_event through db (a pool
// or a transaction); an event recorded before (the same id) is left as it
// is. The webhook package's event log records through it too.
func RecordEvent(ctx context.Context, db interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, ev Event) error {
	raw, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("record %s event: %w", ev.Kind, err)
	}
	var release any
	if ev.Release != 0 {
		release = ev.Release
	}
	if _, err := db.Exec(ctx, `INSERT INTO configpub.webhook_event (event_id, event_kind, env_tag, release_version, event)
		VALUES ($1::uuid, $2, $3, $4, $5) ON CONFLICT (event_id) DO NOTHING`, ev.ID, ev.Kind, ev.EnvTag, release, raw); err != nil {
		return fmt.Errorf("record %s event: %w", ev.Kind, err)
	}
	return nil
}
