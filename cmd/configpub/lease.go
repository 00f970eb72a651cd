package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/promoter"
)

func addLeaseCmd(root *cobra.Command) {
	lease := &cobra.Command{
		Use:   "lease",
		Short: "Manage delivery-manifest leases",
		Args:  cobra.NoArgs,
	}
	var (
		sf     storeFlags
		rf     registryFlags
		env    string
		every  time.Duration
		attach bool
		// attachPrefix is --registry: where --attach attaches.
		attachPrefix string
	)
	renew := &cobra.Command{
		Use:   "renew --env ENV --key cosign.key [--interval D]",
		Short: "Re-sign fresh leases for every current pointer (same sequence, later issuedAt)",
		Long: `renew re-signs, for every current pointer of ENV, its delivery manifest with a
new issuedAt and the pointer's rolling lease window, keeping snapshot and
sequence, in one transaction, and notifies the Config Servers. Revoked snapshots
are skipped so their leases run out. With --interval it repeats at that interval
until interrupted; once it has renewed, a renewal that fails (the database
restarting or failing over, the registry unreachable) is reported on stderr and
tried again after 5s, doubling up to the interval, instead of ending the process
and leaving every lease to run out; the first renewal's error ends it, as without
--interval. Before each renewal it reads --key again: a rotated key (with the same
COSIGN_PASSWORD) signs from then on. With --attach, each renewal also attaches
the renewed manifests to their artifacts in the registry as OCI referrers (as
` + "`configpub registry attach`" + `), so runtimes that pull from the registry keep
a current lease; with --interval the attach must end within three quarters of
the interval (a registry that hangs is a failed attach, reported and retried,
never a renewal held up).

The lease is the short delivery lease (minutes), renewed for as long as a
snapshot stays current. The activation window of a snapshot (weeks: how long a
pointer may be moved to it) is renewed by a new release instead:
configpub compile --renew.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if every < 0 {
				return usageError{errors.New("--interval must not be negative")}
			}
			if attachPrefix != "" && !attach {
				return usageError{errors.New("--registry is where --attach attaches: give --attach too")}
			}
			if attachPrefix != "" {
				if err := checkRegistryPrefix(attachPrefix); err != nil {
					return usageError{err}
				}
			}
			ctx := cmd.Context()
			key := followKey(sf.key, "lease renew "+env)
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			renewed := false // a renewer that never renewed exits on its error
			failures := 0
			checked := "" // the signing key whose lease keys were checked
			for {
				if every > 0 {
					store = key.follow(store, cmd.ErrOrStderr())
				}
				if store.KeyID() != checked {
					checked = store.KeyID()
					warnOtherLeaseKey(ctx, cmd.ErrOrStderr(), store, env)
				}
				wait := every
				res, msg, err := renewOnce(ctx, store, env, attach, attachPrefix, &rf, attachDeadline(every))
				if res != nil && err != nil {
					// Renewed, then the attach failed: the renewal is
					// committed, and -o json says both.
					if rerr := report(cmd, res, func(w io.Writer) error { _, err := fmt.Fprintln(w, msg); return err }); rerr != nil {
						return rerr
					}
				}
				switch {
				case err == nil:
					renewed, failures = true, 0
					if err := report(cmd, res, func(w io.Writer) error { _, err := fmt.Fprintln(w, msg); return err }); err != nil {
						return err
					}
				case every > 0 && ctx.Err() != nil:
					return nil // interrupted: a clean stop (the renewal in flight rolled back)
				case every == 0 || !renewed:
					return storeError(err, env)
				default:
					// Once running, a failure (the database restarted or failed
					// over, the registry unreachable) is reported and retried:
					// a renewer that exits leaves every lease to run out.
					failures++
					wait = retryAfter(failures, every)
					fmt.Fprintf(cmd.ErrOrStderr(), "lease renew %s: renewal failed (%d in a row): %s; next attempt in %s\n",
						env, failures, pgsession.ErrorText(err), wait)
				}
				if every == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
			}
		},
	}
	sf.add(renew, true)
	outputFlag(renew)
	renew.Flags().StringVar(&env, "env", "", "environment tag (required)")
	renew.Flags().DurationVar(&every, "every", 0, "repeat at this interval until interrupted (0 = once)")
	renew.Flags().BoolVar(&attach, "attach", false, "also attach the renewed manifests to their artifacts as OCI referrers (registry credentials from the Docker config)")
	renew.Flags().StringVar(&attachPrefix, "registry", "", "with --attach: attach under this registry prefix instead of where each snapshot was first published (as registry attach --registry)")
	rf.add(renew)
	_ = renew.MarkFlagRequired("env")
	lease.AddCommand(renew, newLeaseResignCmd())
	root.AddCommand(lease)
}

// newLeaseResignCmd is `configpub lease resign`.
func newLeaseResignCmd() *cobra.Command {
	var (
		sf                            storeFlags
		env, reason, actor, commandID string
	)
	cmd := &cobra.Command{
		Use:   "resign --env ENV --reason TEXT --key cosign.key",
		Short: "Re-sign every current pointer with a new, higher sequence (after a restore from a backup)",
		Long: `resign re-signs, for every current pointer of ENV, its delivery manifest with a
new sequence — never below the time of the re-signing in microseconds, so above
every sequence issued before it — and a fresh lease, keeping snapshot, activatedAt
and revocation epoch, in one transaction journaled on the active release, and
notifies the Config Servers. Revoked and retired pointers are skipped.

It is the way back after the release store was restored from a backup taken before
pointer moves that runtimes applied: their seen sequence is above the restored
pointers', so every renewal (same sequence) leaves them behind — a Config Server
answers them 503 (behind the runtime), a runtime that does not say what it holds
refuses the manifest as a regression — and activating the active release moves
nothing. A re-signing moves no pointer; the
same --command-id replays.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			actor, commandID, err := actorAndCommand(actor, commandID)
			if err != nil {
				return err
			}
			store, closeFn, err := sf.open(cmd.Context())
			if err != nil {
				return err
			}
			defer closeFn()
			res, err := store.Resign(cmd.Context(), promoter.ResignInput{CommandID: commandID, EnvTag: env, Actor: actor, Reason: reason})
			if err != nil {
				return storeError(fmt.Errorf("%w (command %s)", err, commandID), env)
			}
			msg := fmt.Sprintf("%s: %d current pointers re-signed with new sequences (release %d active, revocation epoch %d); command %s",
				res.EnvTag, res.Resigned, res.Release, res.To, commandID)
			if res.Replayed {
				msg += " (replayed)"
			}
			msg += notResigned(res)
			return report(cmd, res, func(w io.Writer) error { _, err := fmt.Fprintln(w, msg); return err })
		},
	}
	sf.add(cmd, true)
	outputFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&env, "env", "", "environment tag (required)")
	fl.StringVar(&reason, "reason", "", "why (required; journaled)")
	fl.StringVar(&actor, "actor", "", "who (default $USER)")
	fl.StringVar(&commandID, "command-id", "", "command UUID; re-running with the same id replays (default: a new UUID)")
	_ = cmd.MarkFlagRequired("env")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

// warnOtherLeaseKey warns when store's signing key signed none of env's
// current leases: the renewal replaces leases every runtime accepts with
// leases only runtimes that trust this key accept (a wrong --key, or a key
// rotation whose new key not every runtime trusts yet), and the others
// fail closed when their lease ends. It is a warning, not a refusal: the
// rotation's switch of the signing key looks the same.
func warnOtherLeaseKey(ctx context.Context, w io.Writer, store *promoter.Store, env string) {
	ids, err := store.LeaseKeyIDs(ctx, env)
	if err != nil || len(ids) == 0 || slices.Contains(ids, store.KeyID()) {
		return
	}
	fmt.Fprintf(w, "lease renew %s: warning: signing with key %s, but the current leases are signed by %s: a runtime that does not trust %s "+
		"refuses the renewed leases (UNTRUSTED_KEY) and fails closed when its lease ends; in a key rotation, every runtime must trust the new key first\n",
		env, store.KeyID(), strings.Join(ids, ", "), store.KeyID())
}

// renewReport is what lease renew prints per renewal with -o json: the
// renewal's fields and, with --attach, the attach's (as registry attach
// prints them) or why it failed (the renewal is committed either way).
type renewReport struct {
	*promoter.RenewResult
	Attach      *attachReport `json:"attach,omitempty"`
	AttachError string        `json:"attachError,omitempty"`
}

// renewOnce renews env's leases and, with attach, attaches the renewed
// manifests; it returns the report and its one-line summary. A renewal
// whose attach failed returns both the report and the error.
func renewOnce(ctx context.Context, store *promoter.Store, env string, attach bool, prefix string, rf *registryFlags, attachFor time.Duration) (*renewReport, string, error) {
	res, err := store.RenewLeases(ctx, env)
	if err != nil {
		return nil, "", err
	}
	rep := &renewReport{RenewResult: res}
	msg := fmt.Sprintf("%s: renewed %d leases at %s", env, res.Renewed, res.At.Format(time.RFC3339))
	if res.SkippedCount > 0 {
		msg += fmt.Sprintf(" (%d skipped: revoked or no lease window)", res.SkippedCount)
	}
	if attach {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if attachFor > 0 {
			actx, cancel = context.WithTimeout(ctx, attachFor)
		}
		ar, err := attachRenewed(actx, store, env, prefix, rf)
		cancel()
		if err != nil {
			err = fmt.Errorf("renewed %d leases, attach: %w", res.Renewed, err)
			rep.AttachError = err.Error()
			if ar == nil || !errors.Is(err, promoter.ErrAttachFailed) {
				return rep, msg + "; the attach failed", err
			}
			// Some failed, the others are attached.
			rep.Attach = newAttachReport(env, ar)
			return rep, msg + fmt.Sprintf("; attached %d delivery manifests", ar.AttachedCount) + failedSummary(ar) + pruneSummary(ar), err
		}
		rep.Attach = newAttachReport(env, ar)
		msg += fmt.Sprintf("; attached %d delivery manifests", ar.AttachedCount) + pruneSummary(ar)
	}
	return rep, msg, nil
}

// attachDeadline is how long the attach of one renewal round of lease
// renew --interval may take: three quarters of the interval, so that a
// registry that hangs never holds up the next database renewal (every
// lease, the Config Server path's included, depends on it); 0 (no
// interval) sets none.
func attachDeadline(every time.Duration) time.Duration {
	return every - every/4
}

// attachRenewed attaches env's current manifests (lease renew --attach).
func attachRenewed(ctx context.Context, store *promoter.Store, env, prefix string, rf *registryFlags) (*promoter.AttachResult, error) {
	rc, err := rf.client()
	if err != nil {
		return nil, err
	}
	return store.AttachDeliveryManifestsAt(ctx, env, rc, prefix)
}

// retryAfter is the wait before the next attempt after failures renewals
// failed in a row: 5 s, doubling, never more than the interval.
func retryAfter(failures int, interval time.Duration) time.Duration {
	d := 5 * time.Second
	for i := 1; i < failures && d < interval; i++ {
		d *= 2
	}
	return min(d, interval)
}
