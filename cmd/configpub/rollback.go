package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/promoter"
)

// moveFlags are the flags of rollback and activate.
type moveFlags struct {
	storeFlags
	env, actor, reason, commandID string
	release                       int64
}

func (f *moveFlags) add(cmd *cobra.Command, releaseFlag, releaseHelp string) {
	f.storeFlags.add(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&f.env, "env", "", "environment tag (required)")
	fl.Int64Var(&f.release, releaseFlag, 0, releaseHelp+" (required)")
	fl.StringVar(&f.reason, "reason", "", "why, recorded with every pointer move (required)")
	fl.StringVar(&f.actor, "actor", "", "who, recorded with every pointer move (required)")
	fl.StringVar(&f.commandID, "command-id", "", "command UUID; re-running with the same id replays (default: a new UUID)")
	for _, n := range []string{"env", releaseFlag, "reason", "actor"} {
		_ = cmd.MarkFlagRequired(n)
	}
}

// check refuses, before the store is opened, a release version and a
// command id the store would refuse (exit 1, with a command id of its own).
func (f *moveFlags) check() error {
	if f.release <= 0 {
		return usageError{fmt.Errorf("--release %d: want a positive release version", f.release)}
	}
	if f.commandID != "" {
		if u, err := uuid.Parse(f.commandID); err != nil || u.String() != f.commandID {
			return usageError{fmt.Errorf("--command-id %q: want a lowercase UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)", f.commandID)}
		}
	}
	return nil
}

func (f *moveFlags) id() string {
	if f.commandID == "" {
		f.commandID = uuid.NewString()
	}
	return f.commandID
}

// failed returns a move's error naming its command id once: the store's
// errors mostly name it already (a refusal read "… (command X): … (command
// X)"), and an operator re-runs or looks up the command by it.
func (f *moveFlags) failed(err error) error {
	if f.commandID == "" || strings.Contains(err.Error(), f.commandID) {
		return err
	}
	return fmt.Errorf("%w (command %s)", err, f.commandID)
}

func addRollbackCmd(root *cobra.Command) {
	var f moveFlags
	cmd := &cobra.Command{
		Use:   "rollback --env ENV --release N --reason TEXT --actor NAME --key cosign.key",
		Short: "Move every pointer of an environment back to the snapshots of an older release",
		Long: `rollback restores exactly the target mapping of release N (older than the
active release, and active before it): every target of release N is pointed at its snapshot, and every
identity release N does not contain is retired (served 410 Gone, no lease
renewals), in one transaction, with a signed delivery manifest and a pointer-move
record per change. Snapshots are never edited. Refused, with nothing moved (exit
1): a release that does not exist, a release that was never active (STAGED, or
RECORDED by a promote that caught it up: a rollback returns only to what ran,
and checks no freeze window or candidate; configpub activate moves to it, with
those checks), a revoked snapshot, or a snapshot whose
activation window does not contain the move time (configpub compile --renew
writes a release with fresh snapshots of the same policy);
configpub status says, per release, until when it can be rolled back to
(ACTIVATABLE). The rolled-back release stays recorded: the next release is still
built on the latest recorded one. Exit 3: outcome unknown, re-run with the
printed --command-id or run reconcile.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			store, closeFn, err := f.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := store.Rollback(cmd.Context(), promoter.RollbackInput{
				CommandID: f.id(), EnvTag: f.env, ToRelease: f.release, Actor: f.actor, Reason: f.reason,
			})
			if err != nil {
				return storeError(f.failed(err), f.env)
			}
			return report(cmd, res, func(w io.Writer) error { return printActivation(w, res) })
		},
	}
	f.add(cmd, "to-release", "release to roll back to")
	outputFlag(cmd)
	root.AddCommand(cmd)
}

func printActivation(w io.Writer, res *promoter.ActivationResult) error {
	what := "done"
	if res.Replayed {
		what = "already done (replayed)"
	}
	_, err := fmt.Fprintf(w, "%s %s release %d (from %d): %s; %d pointers moved, %d unchanged, %d retired; command %s\n",
		res.EnvTag, res.Action, res.ReleaseVersion, res.PreviousRelease, what, res.Moved, res.Unchanged, res.Retired, res.CommandID)
	if err == nil && res.Replayed && res.ActiveRelease != res.ReleaseVersion {
		_, err = fmt.Fprintf(w, "note: release %d is %s now; release %d is active; nothing moved\n",
			res.ReleaseVersion, res.StateNow, res.ActiveRelease)
		return err
	}
	if line := returnLine(res); err == nil && line != "" {
		_, err = fmt.Fprintln(w, line)
	}
	return err
}

// returnLine says until when every target can be moved back to the release
// the move replaced, and how, or that the release's activation window has
// ended; "" when there is no such release or its window is unknown.
func returnLine(res *promoter.ActivationResult) string {
	prev, until := res.PreviousRelease, res.PreviousActivatableUntil
	if prev == 0 || prev == res.ReleaseVersion || until == nil || res.Replayed { // a replay's times are the first run's
		return ""
	}
	at := until.UTC().Format(time.RFC3339)
	if !res.ActivatedAt.Before(*until) {
		return fmt.Sprintf("release %d can no longer be returned to: its activation window ended %s (a move back "+
			"is refused when a target would move to a snapshot whose window ended; revert and promote instead)", prev, at)
	}
	how := moveCommandLine("rollback", res.EnvTag, prev)
	if prev > res.ReleaseVersion {
		how = moveCommandLine("activate", res.EnvTag, prev)
	}
	return fmt.Sprintf("release %d can be returned to until %s: %s", prev, at, how)
}

// moveCommandLine is the command line that moves envTag's pointers to
// release with verb (activate or rollback), with every flag it requires:
// the reason, actor and signing key are placeholders to fill in.
func moveCommandLine(verb, envTag string, release int64) string {
	return fmt.Sprintf("configpub %s --env %s --release %d --reason TEXT --actor NAME --key cosign.key", verb, envTag, release)
}
