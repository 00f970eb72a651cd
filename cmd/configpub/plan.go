package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gitfs"
	"github.com/configpub/configpub/internal/planreport"
	"github.com/configpub/configpub/internal/policytree"
)

func addPlanCmd(root *cobra.Command) {
	var repo, env, baseRef, format, createdAt string
	cmd := &cobra.Command{
		Use:   "plan --repo DIR --env ENV [--base-ref REF] [-o text|markdown|json] [--created-at RFC3339]",
		Short: "Show which targets a policy change alters: old -> new values, sources, causes",
		Long: `plan compiles the working tree of the policy repository and the tree at
--base-ref (default HEAD, read with go-git) and lists each target whose artifact
changes. Targets are ADDED, RETIRED (in the base release, not in the new one) or
CHANGED. For a changed target it shows every changed JSON-pointer path with its
old and new value (long or multi-line strings as a unified diff), the source
file:line whose edit it is, and "changed because Agent X changed" when the
target changed through another document (for a Gateway or Knowledge target
whose accepted publications change, the Agent's Target document edited, added
or removed); publications compare by publicationId, not position; then the old -> new digests (folded
in a <details> block in markdown) and how many targets are unchanged. An
unchanged target re-issued because its snapshot's activation window no longer
contains the new release's createdAt (--created-at, else as for compile) says so.
It also says until when the release can be promoted: the activation windows of
the snapshots it creates (promote refuses it outside them); and until when,
once it is promoted, configpub rollback can return to the base release: the
first end of that release's snapshots' activation windows. When that is no
later than the new release's createdAt, it says there is no rollback: the new
release re-issues the target whose window ended, a rollback to the base release
is refused, and undoing the change means reverting it and promoting again.

The digests are final once releases/ENV.yaml is compiled and committed with the
change; until then plan marks them provisional. The markdown starts with the
hidden marker <!-- configpub-plan env=ENV -->, so a workflow keeps one pull
request comment per environment. It writes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" || env == "" {
				return usageError{errors.New("--repo and --env are required")}
			}
			if format != "text" && format != "markdown" && format != "json" {
				return usageError{fmt.Errorf("--output %q: want text, markdown or json", format)}
			}
			// A new release's createdAt decides which unchanged targets are
			// re-issued (activation window), so plan resolves it as compile does.
			at, err := resolveCreatedAt(createdAt, repo)
			if err != nil {
				return err
			}
			// Both releases are compiled for their manifests, keeping the
			// targets a plan reports: the base those of the hosts whose
			// committed shards differ (CommittedChanges), the head those
			// that differ from the base's (PlanKeep). PlanTargets compiles
			// the base again, only the hosts that hold a target that
			// differs, when it lacks one. Of each manifest a plan reads
			// the header and each target's artifact digest: ForStreaming
			// lets go of the rest (at 100,000 targets some hundred
			// megabytes per release) before the next compile.
			tree, err := policytree.Dir(repo, policytree.Limits{})
			if err != nil {
				return err
			}
			defer tree.Close()
			baseFS, err := gitfs.TreeFS(repo, baseRef)
			if err != nil {
				return fmt.Errorf("plan: base %s: %w", baseRef, err)
			}
			opts := compiler.Options{EnvTag: env, CreatedAt: at, ManifestOnly: true, PreviousTree: gitfs.ReleaseTrees(repo, baseRef)}
			if hosts := compiler.CommittedChanges(baseFS, tree, env); hosts != nil {
				opts.Keep = func(e *bundle.TargetEntry) bool { return hosts[e.Host] }
			}
			// A base that holds no release of env (the first pull request
			// of a repository) is release 0: every target is added.
			var base *compiler.Result
			if root, err := compiler.ReadCommittedRoot(baseFS, env); err != nil || root.ReleaseVersion != 0 {
				if base, err = compiler.Compile(cmd.Context(), baseFS, opts); err != nil {
					return fmt.Errorf("plan: compile base %s: %w", baseRef, err)
				}
				base.ForStreaming()
			}
			opts.PreviousTree, opts.Keep = gitfs.ReleaseTrees(repo, "HEAD"), compiler.PlanKeep(base)
			if opts.Ignored, err = gitIgnored(repo); err != nil {
				return err
			}
			// The head release is the one compile would write: built on the
			// release compile builds on.
			chosen, err := chooseBase(cmd.Context(), repo, tree, env, "", false, createdAtPinned(createdAt), &opts)
			if err != nil {
				return err
			}
			head, err := compiler.Compile(cmd.Context(), tree, opts)
			if errors.Is(err, compiler.ErrCreatedAtRequired) {
				return fmt.Errorf("%w (pass --created-at, set SOURCE_DATE_EPOCH, or plan inside the policy Git repository)", err)
			}
			if err != nil {
				return err
			}
			warnIgnored(cmd.ErrOrStderr(), head.Ignored)
			if chosen.onto != "" && chosen.held.version == head.Manifest.ReleaseVersion && chosen.held.digest == head.Manifest.ReleaseDigest {
				// Built on another release than the working tree holds, the
				// head is the working tree's release itself (compiled and
				// not committed yet): its digests are the ones that go live.
				head.UpToDate = true
			}
			head.ForStreaming()
			if err := compiler.PlanTargets(cmd.Context(), base, head); err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			p, err := compiler.NewPlan(base, head, baseRef)
			if err != nil {
				return err
			}
			r, err := planreport.New(planreport.Input{Plan: p, Base: base, Head: head, BaseFS: baseFS, HeadFS: tree})
			if err != nil {
				return err
			}
			if r.NotOnBase, err = notOnBase(cmd.Context(), repo, env, baseRef, chosen, head.Manifest, p); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch format {
			case "markdown":
				return r.WriteMarkdown(w)
			case "json":
				return r.WriteJSON(w)
			}
			if err := r.WriteText(w); err != nil {
				return err
			}
			return writeAddedWorkflowVersions(w, base, head)
		},
	}
	f := cmd.Flags()
	f.StringVar(&repo, "repo", "", "policy repository directory (required)")
	f.StringVar(&env, "env", "", "environment tag (required)")
	f.StringVar(&baseRef, "base-ref", "HEAD", "Git revision to compare against")
	f.StringVar(&format, "format", "text", "output format: text, markdown or json")
	f.StringVar(&createdAt, "created-at", "", "createdAt of the new release (RFC 3339; default as for compile)")
	root.AddCommand(cmd)
}

// notOnBase says why the head release of plan p is not promotable as it
// stands, or "": the working tree's release went back (a revert; chosen
// built on the newer one), or the head release is built on a release the
// history of baseRef does not hold (a branch that compiled more than once).
func notOnBase(ctx context.Context, repo, env, baseRef string, chosen base, head *bundle.Manifest, p *compiler.Plan) (string, error) {
	manifest := compiler.ManifestPath(env)
	if chosen.newer > 0 {
		return fmt.Sprintf("%s holds release %d, which the first-parent history of HEAD holds below release %d (at %s): a revert? "+
			"Releases only move forward, and promote does nothing with a release it recorded before; configpub compile writes release %d, shown here",
			manifest, chosen.held.version, chosen.newer, chosen.onto[:12], head.ReleaseVersion), nil
	}
	if p.Release <= p.BaseRelease || head.BaseReleaseVersion == p.BaseRelease {
		return "", nil
	}
	_, err := gitfs.ReleaseTrees(repo, baseRef)(ctx, env, head.BaseReleaseVersion)
	switch {
	case err == nil:
		return "", nil
	case !errors.Is(err, bundle.ErrReleaseNotRecorded):
		return "", fmt.Errorf("plan: %w", err)
	}
	return fmt.Sprintf("%s is release %d on base %d, but %s holds release %d: promote refuses a release "+
		"whose base it has not recorded; build the change on release %d: configpub compile --base-ref %s",
		manifest, p.Release, head.BaseReleaseVersion, baseRef, p.BaseRelease, p.BaseRelease, baseRef), nil
}
