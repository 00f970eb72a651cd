package promoter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecordResult is the recorded result of Record. A replay returns the same
// value with Replayed set.
type RecordResult struct {
	CommandID      string    `json:"commandId"`
	EnvTag         string    `json:"envTag"`
	ReleaseVersion int64     `json:"releaseVersion"`
	BaseRelease    int64     `json:"baseRelease"`
	ActiveRelease  int64     `json:"activeRelease"` // the active release when recorded (0 = none)
	Targets        int       `json:"targets"`
	RecordedAt     time.Time `json:"recordedAt"`
	Replayed       bool      `json:"-"`
}

// Record records a compiled release in one transaction without activating
// or staging it: the same checks and rows as Stage (command ledger,
// compare-and-swap on the environment's head, artifacts, immutable
// snapshots, release, targets) and nothing else — no pointer, candidate
// pointer or manifest. The release stays RECORDED with the execution
// outcome NOT_REQUESTED: the head the next release builds on, never served.
// `promote` records this way the releases it catches up, so that the
// pointers move once, to the release asked for, instead of through every
// release whose promotion did not run. Activate may move to it later, as
// to any recorded release within its activation windows (ActivateRelease,
// in a two-phase environment, stages it first and waits for every
// candidate READY); Rollback refuses it (ErrNeverActive: it never ran).
// ErrUnconfirmed: re-run the same input.
func (s *Store) Record(ctx context.Context, in ReleaseInput) (*RecordResult, error) {
	res, err := s.recordOnly(ctx, &in)
	if err != nil {
		return nil, fmt.Errorf("record %s release %d (command %s): %w", in.EnvTag, in.ReleaseVersion, in.CommandID, err)
	}
	return res, nil
}

func (s *Store) recordOnly(ctx context.Context, in *ReleaseInput) (*RecordResult, error) {
	cmd, err := unmovedCommand(in, ActionRecord)
	if err != nil {
		return nil, err
	}
	var res RecordResult
	asked := in.Reason
	err = s.runTx(ctx, func(tx pgx.Tx) error {
		res, in.Reason = RecordResult{}, asked // a retried transaction settles the reason again
		now := s.now()
		replayed, err := claimSingle(ctx, tx, cmd, in.Actor, now, &res)
		if err != nil || replayed {
			res.Replayed = replayed
			return err
		}
		e, err := s.insertUnmoved(ctx, tx, in, cmd, now)
		if err != nil {
			return err
		}
		res = RecordResult{CommandID: cmd.ID, EnvTag: in.EnvTag, ReleaseVersion: in.ReleaseVersion,
			BaseRelease: in.BaseReleaseVersion, ActiveRelease: e.Current, Targets: len(in.Targets), RecordedAt: now}
		r := &release{EnvTag: in.EnvTag, Version: in.ReleaseVersion, Revision: 1, State: StateRecorded, Outcome: OutcomeUnconfirmed, LastCmd: cmd.ID}
		if err := mutate(ctx, tx, r, event{Kind: "record-only", ToState: StateRecorded, ToOutcome: OutcomeNotRequested,
			CommandID: cmd.ID, Hash: cmd.Hash, Actor: in.Actor, Reason: in.Reason, RecordedAt: now, Evidence: res}); err != nil {
			return err
		}
		return settleCommand(ctx, tx, cmd.ID, OutcomeApplied, res, now)
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}
