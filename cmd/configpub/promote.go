package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
)

func addPromoteCmd(root *cobra.Command) {
	var (
		rf                                                   registryFlags
		gitDir, policyPath, env, dbURL, registryRef, keyPath string
		ref, commit, signedByPath                            string
		trailers                                             []string
		stage, breakGlass, noCatchUp                         bool
		reason                                               string
	)
	cmd := &cobra.Command{
		Use:   "promote --repo DIR --env ENV --registry HOST[:PORT]/PREFIX --key cosign.key",
		Short: "Promote a reviewed commit: recompile, publish and verify artifacts, record and activate the release",
		Long: `promote checks that the commit (default: the tip of the protected ref) is on the
first-parent history of the protected ref and meets every --require-* policy, recompiles the
policy sources at that commit and requires releases/ENV.yaml to be exactly what
they compile to (else the release is STALE and nothing changes), publishes and
signs every artifact (idempotent) and verifies each by digest, then records the
release and moves every target pointer in one transaction.

Releases are recorded in order. When the commit's release is built on releases
the store has not recorded (their promotions never ran: a CI run cancelled while
newer pushes queued, a lost runner), promote first checks the commit's release
against its base as committed, then publishes and records each missing release
from the commit of the first-parent history that holds it, oldest first, without
activating it, then promotes the commit: the pointers move once, from the active
release to the commit's, never through a release that was superseded before its
promotion ran (--no-catch-up refuses instead).

With --stage the release is recorded as STAGED and no pointer moves; activate it
later with configpub activate (an environment with two-phase activation is always
staged). Inside a freeze window of the environment promote is refused (exit 1,
naming the window) unless --break-glass --reason TEXT, which is journaled. The
rollout policy of the active release holds for the release that replaces it: its
freeze windows refuse, and its two-phase activation stages, a release whose own
policy drops them.

Exit codes: 0 done (or replayed), 1 refused (not reviewed, stale, conflict, frozen),
2 usage, 3 outcome unconfirmed (re-run the same promote or run reconcile).
The cosign key password is read from COSIGN_PASSWORD. The protected ref is the
promoter's configuration, CONFIGPUB_PROTECTED_REF (default refs/heads/main), not a
choice of the caller: --ref, when given, must name the same ref, and a policy
repository whose configpub.yaml declares another spec.protectedRef is refused.

A policy repository in a subdirectory of the Git repository (a monorepo's
policy/) is named by --repo in a checkout (--repo policy), or by --path from the
Git repository's root, which also serves a bare repository, having no checkout
(--repo policy.git --path policy).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct{ name, v string }{{"--repo", gitDir}, {"--env", env}, {"--registry", registryRef}, {"--key", keyPath}} {
				if f.v == "" {
					return usageError{fmt.Errorf("%s must not be empty", f.name)}
				}
			}
			if breakGlass && reason == "" {
				return usageError{errors.New("--break-glass needs --reason")}
			}
			pathDir, err := policyPathFlag(policyPath)
			if err != nil {
				return usageError{err}
			}
			if dbURL == "" {
				dbURL = os.Getenv("CONFIGPUB_DATABASE_URL")
			}
			if dbURL == "" {
				return usageError{errors.New("--database is required (or set CONFIGPUB_DATABASE_URL)")}
			}
			if err := checkRegistryPrefix(registryRef); err != nil {
				return usageError{err}
			}
			keyring, err := signedByKeyring(signedByPath)
			if err != nil {
				return err
			}
			password, err := cosignPassword()
			if err != nil {
				return usageError{err}
			}
			signer, err := cosignkey.LoadPrivateKeyFile(keyPath, password)
			if err != nil {
				return err
			}
			repo, dir, err := review.OpenPolicy(gitDir)
			if err != nil {
				return err
			}
			if policyPath != "" {
				if dir != "" {
					return usageError{fmt.Errorf("--path %s: --repo %s already names the policy directory %s/ of its checkout; "+
						"pass --repo at the Git repository's root (or a bare repository) with --path, or --repo alone", policyPath, gitDir, dir)}
				}
				dir = pathDir
			}
			ctx := cmd.Context()
			pool, err := pgsession.NewPool(ctx, dbURL)
			if err != nil {
				return fmt.Errorf("--database: %w", err)
			}
			defer pool.Close()
			notifier, drain, err := notifierFromEnv(pool)
			if err != nil {
				return err
			}
			defer drain()
			store, err := promoter.Open(ctx, pool, promoter.Options{Signer: signer, Notifier: notifier})
			if err != nil {
				return err
			}
			client, err := rf.client()
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			if verbose(cmd) {
				logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			}
			res, err := promote.Run(ctx, repo, promote.Options{
				EnvTag: env,
				Dir:    dir,
				Review: review.Options{
					ProtectedRef: os.Getenv("CONFIGPUB_PROTECTED_REF"), Ref: ref,
					Commit: commit, RequireSignedBy: keyring, RequireTrailers: trailers,
				},
				Store:            store,
				Registry:         client,
				RegistryPrefix:   registryRef,
				Signer:           signer,
				Logger:           logger,
				Stage:            stage,
				BreakGlass:       breakGlass,
				BreakGlassReason: reason,
				NoCatchUp:        noCatchUp,
			})
			if errors.Is(err, promoter.ErrUnconfirmed) || errors.Is(err, promoter.ErrPending) {
				return unconfirmedError{fmt.Errorf("%w (re-run the same promote or run `configpub reconcile --env %s`)", err, env)}
			}
			if err != nil {
				return pathHint(repo, dir, err)
			}
			return report(cmd, res, func(w io.Writer) error { return printPromoteResult(w, res) })
		},
	}
	rf.add(cmd)
	outputFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&gitDir, "git", "", "policy Git repository (worktree or bare), or the policy repository's directory inside a worktree (a monorepo's policy/) (required)")
	f.StringVar(&policyPath, "path", "", "the policy repository's directory inside the Git repository --repo names, from its root (a bare repository's policy/: --path policy), as Flux's Kustomization spec.path")
	f.StringVar(&env, "env", "", "environment tag to promote (required)")
	f.StringVar(&dbURL, "database", "", "PostgreSQL URL (default $CONFIGPUB_DATABASE_URL)")
	f.StringVar(&registryRef, "registry", "", "OCI registry and repository prefix, HOST[:PORT]/PREFIX (required)")
	f.StringVar(&keyPath, "key", "", "cosign.key signing the artifacts and delivery manifests; password from COSIGN_PASSWORD (required)")
	f.StringVar(&ref, "ref", "", "must equal the protected ref the promoter is configured with ($CONFIGPUB_PROTECTED_REF, default "+review.DefaultRef+"); it cannot choose another")
	f.StringVar(&commit, "commit", "", "commit to promote (default: the tip of the protected ref)")
	f.StringVar(&signedByPath, "require-signed-by", "", "require a valid commit signature by one of these keys: \"github\" for GitHub's web-flow keys (shipped, fingerprint-pinned; GitHub signs merge and squash commits with them) or an armored OpenPGP keyring file")
	f.StringArrayVar(&trailers, "require-trailer", nil, "require this trailer in the commit message, e.g. Reviewed-by (repeatable)")
	f.BoolVar(&stage, "stage", false, "record the release as STAGED and move nothing (activate it later)")
	f.BoolVar(&noCatchUp, "no-catch-up", false, "do not first promote, in order, the releases of the first-parent history between the store's latest and the one the commit's release is built on")
	f.BoolVar(&breakGlass, "break-glass", false, "promote inside a freeze window (needs --reason, journaled)")
	f.StringVar(&reason, "reason", "", "why the freeze window is broken (with --break-glass)")
	for _, name := range []string{"git", "env", "registry", "key"} {
		_ = cmd.MarkFlagRequired(name)
	}
	root.AddCommand(cmd)
}

func printPromoteResult(w io.Writer, res *promote.Result) error {
	for _, c := range res.CaughtUp {
		if _, err := fmt.Fprintf(w, "caught up first: release %d from %s, which release %d is built on and the store had not recorded (a promotion that did not run):\n  ",
			c.ReleaseVersion, c.Commit, c.ReleaseVersion+1); err != nil {
			return err
		}
		if err := printPromoteResult(w, c.Result); err != nil {
			return err
		}
	}
	if err := printPromoteOutcome(w, res); err != nil {
		return err
	}
	if res.Resigned > 0 {
		from := ""
		if len(res.RotatedFrom) > 0 {
			from = " " + strings.Join(res.RotatedFrom, ", ") + " (which this store signed with before)"
		}
		if _, err := fmt.Fprintf(w, "signed %d artifacts published before under another key%s with this key too (after a key rotation: they verify with either key)\n", res.Resigned, from); err != nil {
			return err
		}
	}
	if res.Replaced > 0 {
		if _, err := fmt.Fprintf(w, "signed %d artifacts published before whose signatures are by a key this store never signed with: their signatures were replaced in the registry — not a key rotation: find out who pushed them (or a key retired before the database's migration 29, which recorded none, signed them)\n", res.Replaced); err != nil {
			return err
		}
	}
	if res.Unsigned > 0 {
		_, err := fmt.Fprintf(w, "signed %d artifacts published before that carried no signature at all: their signatures were deleted from the registry (or never pushed) — not a key rotation: find out what removed them\n", res.Unsigned)
		return err
	}
	return nil
}

// printPromoteOutcome prints what the promotion did with the release.
func printPromoteOutcome(w io.Writer, res *promote.Result) error {
	if rec := res.Recorded; rec != nil {
		verb := "recorded"
		if rec.Replayed {
			verb = "already recorded (replayed)"
		}
		_, err := fmt.Fprintf(w, "%s release %d (base %d) from %s: %s, not activated: no pointer moved (%d targets; %d artifacts verified); command %s\n",
			res.EnvTag, res.ReleaseVersion, res.BaseRelease, res.Review.Commit, verb, rec.Targets, len(res.Published), res.CommandID)
		return err
	}
	if st := res.Staged; st != nil {
		switch {
		case st.Replayed && st.StateNow == promoter.StateActive:
			_, err := fmt.Fprintf(w, "%s release %d (base %d) from %s: staged earlier by this command (replayed) and since activated: it is the active release; nothing moved\n",
				res.EnvTag, res.ReleaseVersion, res.BaseRelease, res.Review.Commit)
			return err
		case st.Replayed && st.StateNow != "" && st.StateNow != promoter.StateStaged:
			// Staged by this command earlier, and rolled back or failed
			// since: nothing is staged again.
			return printNotReactivated(w, res, st.StateNow, st.ActiveNow, "staged earlier by this command (replayed)")
		}
		verb := "staged"
		if st.Replayed {
			verb = "already staged (replayed)"
		}
		mode := ""
		if st.TwoPhase {
			mode = "; two-phase: activate moves nothing before every moving target has a READY receipt (configpub readback --prefetch asks each runtime to fetch and verify its candidate and records its answer)"
		}
		_, err := fmt.Fprintf(w, "%s release %d (base %d) from %s: %s; no pointer moved (%d targets, %d would move)%s; activate with: %s; command %s\n",
			res.EnvTag, res.ReleaseVersion, res.BaseRelease, res.Review.Commit, verb, st.Targets, st.Moving, mode,
			moveCommandLine("activate", res.EnvTag, res.ReleaseVersion), res.CommandID)
		return err
	}
	if res.AlreadyActiveFrom != "" {
		_, err := fmt.Fprintf(w, "%s release %d is already active (activated from %s); %s changes no policy input; nothing written\n",
			res.EnvTag, res.ReleaseVersion, res.AlreadyActiveFrom, res.Review.Commit)
		return err
	}
	if res.AlreadyRecordedFrom != "" {
		return printNotReactivated(w, res, res.RecordedState, res.ActiveRelease,
			fmt.Sprintf("recorded earlier from %s", res.AlreadyRecordedFrom))
	}
	a := res.Activation
	if a.Replayed && a.StateNow != promoter.StateActive {
		return printNotReactivated(w, res, a.StateNow, a.ActiveRelease, "promoted earlier by this command (replayed)")
	}
	verb := "activated"
	if a.Replayed {
		verb = "already active (replayed)"
	}
	_, err := fmt.Fprintf(w, "%s release %d (base %d) from %s: %s; %d pointers moved, %d unchanged, %d retired; %d artifacts verified; command %s\n",
		res.EnvTag, res.ReleaseVersion, res.BaseRelease, res.Review.Commit, verb, a.Moved, a.Unchanged, a.Retired, len(res.Published), res.CommandID)
	if line := returnLine(a); err == nil && line != "" {
		_, err = fmt.Fprintln(w, line)
	}
	return err
}

// printNotReactivated reports a promotion of a release that is recorded but
// not active (rolled back): nothing moved, and how to return to it.
func printNotReactivated(w io.Writer, res *promote.Result, state string, activeRelease int64, how string) error {
	active := "no release is active"
	if activeRelease != 0 {
		active = fmt.Sprintf("release %d is active", activeRelease)
	}
	back := "to return to it: " + moveCommandLine("activate", res.EnvTag, res.ReleaseVersion)
	if activeRelease > res.ReleaseVersion && !promoter.NeverActive(state) {
		// An older release that ran: a rollback returns to it (one that
		// never ran is activated, with an activation's checks); a commit that took
		// the release back (a revert) wants the next release instead.
		back = "to return to it: " + moveCommandLine("rollback", res.EnvTag, res.ReleaseVersion) + "; to make this commit's sources " +
			"a new release (a revert), configpub compile builds the next release on the newest one and a promotion of that commit activates it"
	}
	_, err := fmt.Fprintf(w, "%s release %d (base %d) from %s: %s and since %s; %s; nothing moved (%s)\n",
		res.EnvTag, res.ReleaseVersion, res.BaseRelease, res.Review.Commit, how,
		strings.ToLower(strings.ReplaceAll(state, "_", " ")), active, back)
	return err
}

// policyPathFlag checks promote's --path: a directory of the Git tree,
// relative to its root, returned slash-separated ("" for none or the root).
func policyPathFlag(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	d := review.CleanDir(p)
	if d != "" && (!fs.ValidPath(d) || path.IsAbs(p) || filepath.IsAbs(p)) {
		return "", fmt.Errorf("--path %s: want the policy directory relative to the Git repository's root, without .. (for example --path policy)", p)
	}
	return d, nil
}

// pathHint adds to an error of promote whose tree at dir is not the policy
// repository but holds one below (a bare repository promoted without
// --path, or a --path above the policy directory) the --path to pass: a
// bare repository has no checkout for the --repo hint to name.
func pathHint(repo *git.Repository, dir string, err error) error {
	var nested *compiler.NestedRepositoryError
	if !errors.As(err, &nested) {
		return err
	}
	if _, werr := repo.Worktree(); dir == "" && !errors.Is(werr, git.ErrIsBareRepository) {
		return err // a checkout's root: explainRepo names the --repo to pass
	}
	return hintError{err, "pass --path " + path.Join(dir, nested.Dirs[0])}
}
