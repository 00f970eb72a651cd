package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gitfs"
	"github.com/configpub/configpub/internal/policytree"
)

func addCompileCmd(root *cobra.Command) {
	var repo, env, out, createdAt, baseRef string
	var check, renew bool
	cmd := &cobra.Command{
		Use:   "compile --repo DIR --env ENV [--out DIR] [--check | --renew] [--created-at RFC3339] [--base-ref REF]",
		Short: "Compile a policy repository into values.yml per target and the release manifest",
		Long: `compile resolves, projects, digests, renders and validates every target of
one environment. It rewrites releases/ENV.yaml when the sources changed, and with
--out writes OUT/ENV/HOST/SERVICEID/values.yml plus target.json. --check writes
nothing and exits 1 naming the sources edited since the committed manifest was
compiled and its first differing field when it is stale: the manifest is re-derived from the sources and the previous release as
recorded in the first-parent Git history of HEAD, never trusted. A new release's createdAt is --created-at, else SOURCE_DATE_EPOCH, else
the commit time of the policy repository's HEAD.

A pull request carries one release: on a branch that compiled before,
--base-ref origin/main builds on the release committed at origin/main (N) instead
of the working tree's (the branch's own N+1), writing N+1 on N again as if every
edit were compiled at once (HEAD must contain the revision); with --check it
verifies against that revision's history.

A release keeps an unchanged target's snapshot only while that snapshot's
activation window contains the release's createdAt, and the lease profile's
renewBefore after it (with a renewSpread, until the host's last renewal time
before that); promote, activate and rollback refuse a pointer move to a
snapshot outside its window. --renew writes the next release also when the
sources did not change: it re-issues, with the same policy, the targets whose
snapshot's window is due for renewal at createdAt (it ends by createdAt plus
renewBefore, or a renewSpread's renewal time of the host came first; a Gateway
or Knowledge service bound to a re-issued Agent lists its new publication), and
keeps every other snapshot. Promote it to renew the windows of a release no
longer activatable (a staged release that waited too long), or before a change
after a quiet period, so that the change keeps a release to roll back to; run
daily with a renewBefore longer than a day, it renews every window before it
ends, so the current release can always be rolled back to; with a renewSpread
of a week, each host on a day of its own. Pass --created-at (the current time,
say): HEAD's commit time is usually inside the windows, and then there is
nothing to renew. (The short delivery lease of what is current is renewed by
configpub lease renew, not by a release.)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" || env == "" {
				return usageError{errors.New("--repo and --env are required")}
			}
			if check && renew {
				return usageError{errors.New("--check writes nothing and --renew writes a release: use one")}
			}
			at, err := resolveCreatedAt(createdAt, repo)
			if err != nil {
				return err
			}
			if check && at.IsZero() {
				// --check only compares; a new release's createdAt is irrelevant.
				at = time.Unix(0, 0).UTC()
			}
			tree, err := policytree.Dir(repo, policytree.Limits{})
			if err != nil {
				return err
			}
			defer tree.Close()
			ignored, err := gitIgnored(repo)
			if err != nil {
				return err
			}
			copts := compiler.Options{EnvTag: env, CreatedAt: at, PreviousTree: gitfs.ReleaseTrees(repo, "HEAD"),
				ManifestOnly: true, CheckOnly: check, Renew: renew, Ignored: ignored} // --out compiles the targets again, host by host
			b, err := chooseBase(cmd.Context(), repo, tree, env, baseRef, check, createdAtPinned(createdAt), &copts)
			if err != nil {
				return err
			}
			if check && copts.Committed == nil {
				copts.Introduced = introducedTree(repo) // a stale release names the sources edited since
			}
			res, err := compiler.Compile(cmd.Context(), tree, copts)
			if errors.Is(err, compiler.ErrCreatedAtRequired) {
				return fmt.Errorf("%w (pass --created-at, set SOURCE_DATE_EPOCH, or compile inside the policy Git repository)", err)
			}
			if err != nil {
				return err
			}
			warnIgnored(cmd.ErrOrStderr(), res.Ignored)
			sum := compileSummary{EnvTag: env, Manifest: compiler.ManifestPath(env), Release: res.Manifest.ReleaseVersion,
				BaseRelease: res.Manifest.BaseReleaseVersion, Targets: len(res.Manifest.Targets), ReleaseDigest: res.Manifest.ReleaseDigest,
				Reissued: len(res.Reissued)}
			sum.PromotableFrom, sum.PromotableUntil = res.PromotionWindow()
			if check {
				if err := res.Stale(); err != nil {
					return err
				}
				sum.State = "up to date"
				return report(cmd, sum, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "%s is up to date: release %d, %d targets, %s\n", sum.Manifest, sum.Release, sum.Targets, sum.ReleaseDigest)
					return err
				})
			}
			if err := res.Stale(); errors.Is(err, bundle.ErrHistoryIncomplete) {
				// Written on the committed release as it is: say that it
				// was not verified, and why.
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %v\n", err)
			}
			if err := compiler.Write(cmd.Context(), res, repo, out); err != nil {
				return err
			}
			held := b.held
			rebuilt := b.onto != "" && (held.version != res.Manifest.ReleaseVersion || held.digest != res.Manifest.ReleaseDigest)
			if b.onto != "" && res.Unchanged() {
				// The release built on is what derives: the working tree's
				// files become its (only those that differ are written).
				archive, err := res.ReleaseArchive()
				if err != nil {
					return err
				}
				if err := compiler.WriteReleaseFiles(cmd.Context(), repo, archive); err != nil {
					return fmt.Errorf("write release manifest: %w", err)
				}
			}
			for _, t := range res.Manifest.Targets {
				if t.Changed {
					sum.Changed++
				}
			}
			sum.State = "rewritten"
			if (b.onto == "" && res.Unchanged()) || (b.onto != "" && !rebuilt) {
				sum.State = "unchanged"
			}
			if rebuilt && held.version != 0 && held.version != res.Manifest.ReleaseVersion && held != b.ontoRelease {
				sum.RebuiltFrom, sum.BaseRef = held.version, b.onto
			}
			if sum.State == "rewritten" {
				warnPromotionEnded(cmd.ErrOrStderr(), sum, res.Manifest.CreatedAt, createdAtPinned(createdAt), time.Now())
			}
			return report(cmd, sum, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "release %s/%d (base %d): %d targets, %d changed; %s %s %s\n", env, sum.Release, sum.BaseRelease, sum.Targets, sum.Changed, sum.Manifest, sum.State, sum.ReleaseDigest)
				switch {
				case err != nil || sum.RebuiltFrom == 0:
				case b.newer > 0:
					_, err = fmt.Fprintf(w, "%s held release %d, older than release %d at %s: built on release %d (releases only move forward; a reverted release is a new one)\n",
						sum.Manifest, sum.RebuiltFrom, b.newer, b.onto[:12], b.newer)
				default:
					_, err = fmt.Fprintf(w, "%s held release %d, not in %s: rebuilt on the release %s holds\n", sum.Manifest, sum.RebuiltFrom, baseRef, baseRef)
				}
				if err == nil && sum.State == "rewritten" && sum.Reissued > 0 {
					_, err = fmt.Fprintf(w, "%d re-issued: unchanged targets whose snapshot's activation window is due for renewal at createdAt %s (it ends within the lease profile's renewBefore, or by a renewSpread the host's renewal time came first; configpub plan says why, per target)\n",
						sum.Reissued, res.Manifest.CreatedAt)
				}
				if err == nil && sum.State == "rewritten" && sum.PromotableUntil != "" {
					_, err = fmt.Fprintf(w, "promotable from %s until %s (the activation windows of the snapshots release %d creates; promote refuses it outside them)\n",
						sum.PromotableFrom, sum.PromotableUntil, sum.Release)
				}
				if err == nil && renew && sum.State == "unchanged" {
					_, err = fmt.Fprintf(w, "nothing to renew: every snapshot of release %d can be activated at %s and for its lease profile's renewBefore after, and no host's renewSpread renewal time for it has come; renew later (--created-at)\n",
						sum.Release, at.Format(time.RFC3339))
				}
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", "", "policy repository directory (required)")
	f.StringVar(&env, "env", "", "environment tag to compile (required)")
	f.StringVar(&out, "out", "", "write values.yml and target.json per target under this directory")
	f.BoolVar(&check, "check", false, "write nothing; exit 1 if releases/ENV.yaml is stale")
	f.BoolVar(&renew, "renew", false, "write the next release even when nothing changed, re-issuing the snapshots whose activation window is due for renewal at createdAt (the lease profile's renewBefore and renewSpread)")
	f.StringVar(&createdAt, "created-at", "", "createdAt of a new release (RFC 3339)")
	f.StringVar(&baseRef, "base-ref", "", "build on the release committed at this Git revision (the branch the change merges onto, e.g. origin/main), not on the working tree's: HEAD must contain it")
	outputFlag(cmd)
	root.AddCommand(cmd)
}

// compileSummary is what compile reports (-o json).
type compileSummary struct {
	EnvTag      string `json:"envTag"`
	Manifest    string `json:"manifest"`
	State       string `json:"state"` // up to date | rewritten | unchanged
	Release     int64  `json:"release"`
	BaseRelease int64  `json:"baseRelease"`
	Targets     int    `json:"targets"`
	Changed     int    `json:"changed"`
	// Reissued counts the unchanged targets the release re-issues, their
	// snapshot's activation window not containing its createdAt.
	Reissued      int    `json:"reissued,omitempty"`
	ReleaseDigest string `json:"releaseDigest"`
	// PromotableFrom and PromotableUntil bound when promote accepts the
	// release: the activation windows of the snapshots it creates (absent
	// when it creates none).
	PromotableFrom  string `json:"promotableFrom,omitempty"`
	PromotableUntil string `json:"promotableUntil,omitempty"`
	// RebuiltFrom is the release the working tree held when the release
	// written is built on another, BaseRef's: with --base-ref, a release
	// the branch compiled before; or a newer release in HEAD's history
	// (BaseRef its commit) when the working tree's went back (a revert).
	RebuiltFrom int64  `json:"rebuiltFrom,omitempty"`
	BaseRef     string `json:"baseRef,omitempty"`
}

// base is the release a compile builds on, when not the working tree's.
type base struct {
	held        heldRelease // the release the working tree holds
	onto        string      // the revision whose release is built on ("": the working tree's)
	ontoRelease heldRelease // the release onto holds
	newer       int64       // the newer release a reverted working tree is built on, else 0
}

// chooseBase decides which release a compile of the working tree wt (the
// policy repository at repo) builds on and sets opts up for it: with --base-ref, the release at that revision; when the working tree
// holds a release that the first-parent history of HEAD holds below a
// newer one (a revert), the newer one — releases only move forward; --check
// refuses that release as stale — and when it holds a release newer than
// HEAD's that HEAD does not hold (the output of an earlier compile, never
// committed), HEAD's, rather than chain a release on one no commit holds
// (with no release at HEAD, only a release 1 is redone so), keeping its
// createdAt unless pinned (--created-at, SOURCE_DATE_EPOCH). Else the working tree's, as committed.
func chooseBase(ctx context.Context, repo string, wt fs.FS, env, baseRef string, check, pinned bool, opts *compiler.Options) (base, error) {
	var b base
	held, err := rootOf(wt, env)
	if err != nil {
		// A root that does not parse (conflict markers, say): built on
		// as it is, the compile says what is wrong with it; --base-ref
		// does not read it.
		held = heldRelease{}
	}
	b.held = held
	if baseRef != "" {
		b.onto = baseRef
		b.ontoRelease, err = onBaseRef(repo, baseRef, check, opts)
		return b, err
	}
	if held.version == 0 {
		return b, nil
	}
	v, c, err := gitfs.NewerRelease(ctx, repo, "HEAD", env, held.version, held.digest)
	if errors.Is(err, gitfs.ErrNotRepository) {
		return b, nil
	}
	if err != nil {
		return b, err
	}
	if v > 0 {
		if check {
			return b, fmt.Errorf("%w: %s is release %d, but the first-parent history of HEAD holds release %d (at %s): releases only move forward "+
				"(a reverted release? promote does nothing with a release it recorded before); configpub compile builds release %d with these sources on release %d",
				compiler.ErrStale, compiler.ManifestPath(env), held.version, v, c[:12], v+1, v)
		}
		b.onto, b.newer = c, v
		b.ontoRelease, err = onBaseRef(repo, c, false, opts)
		return b, err
	}
	if check {
		return b, nil
	}
	head, err := gitfs.TreeFS(repo, "HEAD")
	if err != nil {
		return b, nil // no commit yet: nothing is committed to build on
	}
	h, err := rootOf(head, env)
	if err != nil || held.version <= h.version {
		return b, nil
	}
	if h.version == 0 && held.version != 1 {
		// HEAD holds no release, the working tree a later one: release
		// files brought from elsewhere, not a compile's output to redo.
		return b, nil
	}
	// HEAD's release, read from the tree just read (release N-1 is looked
	// up from HEAD, as without this).
	b.onto, b.ontoRelease, opts.Committed = "HEAD", h, head
	if t, err := bundle.ParseTime(held.createdAt); err == nil && !pinned && held.version == h.version+1 {
		// The release being prepared keeps the createdAt it was first
		// compiled with (a --created-at then, say), unless one is given.
		opts.CreatedAt = t
	}
	return b, nil
}

// createdAtPinned reports whether a new release's createdAt is given
// (--created-at, SOURCE_DATE_EPOCH) rather than taken from HEAD.
// warnPromotionEnded warns when the release just written can no longer be
// promoted at now: its activation windows start at createdAt, which (from
// HEAD's commit time in a quiet repository) may be weeks old, so promote
// would refuse it. The output itself is unchanged.
func warnPromotionEnded(w io.Writer, sum compileSummary, createdAt string, pinned bool, now time.Time) {
	until, err := time.Parse(time.RFC3339, sum.PromotableUntil)
	if err != nil || until.After(now) {
		return
	}
	from := "HEAD's commit time"
	if pinned {
		from = "--created-at or SOURCE_DATE_EPOCH"
	}
	fmt.Fprintf(w, "warning: release %d can be promoted only until %s, which has passed: its createdAt %s is %s; compile with --created-at (the current time, say) for a release promote accepts\n",
		sum.Release, sum.PromotableUntil, createdAt, from)
}

func createdAtPinned(flag string) bool {
	return flag != "" || os.Getenv("SOURCE_DATE_EPOCH") != ""
}

// onBaseRef sets opts up to build on the release committed at baseRef
// instead of the working tree's (compile --base-ref): HEAD must contain
// baseRef (a release built on its release from sources without its changes
// would undo them); release N-1 is looked up in baseRef's history; and,
// unless check, the committed release is read from baseRef's tree. It
// returns the release baseRef holds.
func onBaseRef(repo, baseRef string, check bool, opts *compiler.Options) (heldRelease, error) {
	if err := gitfs.Contains(repo, "HEAD", baseRef); err != nil {
		if errors.Is(err, gitfs.ErrNotContained) {
			return heldRelease{}, fmt.Errorf("--base-ref %s: %w: merge or rebase onto it first (a release built on its release from sources without its changes would undo them)", baseRef, err)
		}
		return heldRelease{}, fmt.Errorf("--base-ref %s: %w", baseRef, err)
	}
	opts.PreviousTree = gitfs.ReleaseTrees(repo, baseRef)
	committed, err := gitfs.TreeFS(repo, baseRef)
	if err != nil {
		return heldRelease{}, fmt.Errorf("--base-ref %s: %w", baseRef, err)
	}
	if !check {
		opts.Committed = committed
	}
	h, err := rootOf(committed, opts.EnvTag)
	if err != nil {
		return heldRelease{}, fmt.Errorf("--base-ref %s: %w", baseRef, err)
	}
	return h, nil
}

// heldRelease is the release a working tree (or a revision) holds by the
// version and releaseDigest its root states (zero when it holds none).
type heldRelease struct {
	version   int64
	digest    string
	createdAt string
}

// rootOf returns the release the tree fsys holds.
func rootOf(fsys fs.FS, env string) (heldRelease, error) {
	r, err := compiler.ReadCommittedRoot(fsys, env)
	return heldRelease{r.ReleaseVersion, r.ReleaseDigest, r.CreatedAt}, err
}

// resolveCreatedAt picks a new release's createdAt: the flag, else
// SOURCE_DATE_EPOCH, else the HEAD commit time of the repository (zero when
// the directory is not a Git repository: Compile then refuses to start a new
// release).
func resolveCreatedAt(flag, repo string) (time.Time, error) {
	if flag != "" {
		t, err := time.Parse(time.RFC3339, flag)
		if err != nil {
			return time.Time{}, usageError{fmt.Errorf("--created-at: %w", err)}
		}
		return t.UTC(), nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, usageError{fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)}
		}
		return time.Unix(n, 0).UTC(), nil
	}
	t, err := gitfs.HeadCommitTime(repo)
	if errors.Is(err, gitfs.ErrNotRepository) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("createdAt from HEAD: %w", err)
	}
	return t, nil
}

// introducedTree is compiler.IntroducedTree for the policy repository repo,
// the root of its Git repository or a directory inside it: repo's tree at
// the commit that introduced HEAD's release file (gitfs.IntroducedTree).
func introducedTree(repo string) compiler.IntroducedTree {
	return func(ctx context.Context, envTag string) (fs.FS, error) {
		return gitfs.IntroducedTree(ctx, repo, envTag)
	}
}
