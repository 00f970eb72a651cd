package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Event kinds delivered to a Notifier.
const (
	EventStaged      = "release.staged"
	EventActivated   = "release.activated"
	EventRolledBack  = "release.rolled_back"
	EventFailed      = "release.failed"
	EventRejected    = "candidate.rejected"
	EventUnconfirmed = "outcome.unconfirmed"
)

// Event is one release state change, rollback, rejection or unconfirmed
// outcome, as delivered to webhooks. It names releases and identities,
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

// Text is the one-line, Slack-compatible summary of the event.
func (e *Event) Text() string {
	s := fmt.Sprintf("configpub %s: %s release %d", e.Kind, e.EnvTag, e.Release)
	if e.State != "" {
		s += " " + e.State
	}
	if e.PreviousRelease != 0 {
		s += fmt.Sprintf(" (from release %d)", e.PreviousRelease)
	}
	if e.Actor != "" {
		s += " by " + e.Actor
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Detail != "" {
		s += " — " + e.Detail
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
// rolled back, or unconfirmed.
func (s *Store) emitMove(ctx context.Context, action, envTag string, version int64, actor, reason string, res *ActivationResult, err error) {
	switch {
	case errors.Is(err, ErrUnconfirmed):
		s.emit(ctx, Event{Kind: EventUnconfirmed, EnvTag: envTag, Release: version, Outcome: OutcomeUnconfirmed,
			Actor: actor, Reason: reason, Detail: action + " outcome unknown: re-run the same command or reconcile"})
	case err != nil || res == nil || res.Replayed:
	case action == ActionRollback:
		s.emit(ctx, Event{Kind: EventRolledBack, EnvTag: envTag, Release: version, PreviousRelease: res.PreviousRelease,
			State: StateActive, Outcome: res.Outcome, Actor: actor, Reason: reason,
			Detail: fmt.Sprintf("%d pointers moved, %d retired", res.Moved, res.Retired)})
	default:
		s.emit(ctx, Event{Kind: EventActivated, EnvTag: envTag, Release: version, PreviousRelease: res.PreviousRelease,
			State: StateActive, Outcome: res.Outcome, Actor: actor, Reason: reason,
			Detail: fmt.Sprintf("%d pointers moved, %d unchanged, %d retired", res.Moved, res.Unchanged, res.Retired)})
	}
}
