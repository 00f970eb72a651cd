package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gitfs"
	"github.com/configpub/configpub/internal/policytree"
)

func addValidateCmd(root *cobra.Command) {
	var audience, repo string
	cmd := &cobra.Command{
		Use:   "validate FILE [--config-audience agent|gateway|knowledge] [--repo DIR]",
		Short: "Check a values.yml against its audience schema and the digest rules",
		Long: `validate checks a values.yml: strict YAML, its audience schema and rules, the
envelope's order, and that runtimePolicy.contentDigest is the digest of its
namespace. The file records no digest of its settings, and its own
artifactDigest is the digest of whatever bytes it has, so alone it cannot tell a
setting edited after rendering: with --repo DIR it also reads the release the
policy repository DIR holds for the file's environment (releases/ENV.yaml and
its shard) and fails unless the file is that release's publication of its
target and its settings (propertySetDigest), namespace (contentDigest) and
bytes (artifactDigest) are the ones the release records. A file of another
release (an older release's values.yml) is compared with the release it names,
read from the first-parent history of DIR's Git HEAD; when DIR is not in a Git
repository, or its history does not hold that release, validate fails naming
the release the file is of and the one DIR holds. Without --repo it says what
it did not check.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := policytree.ReadFile(args[0], 0)
			if err != nil {
				return err
			}
			r, err := compiler.ValidateArtifact(args[0], b, audience)
			if err != nil {
				return err
			}
			e := r.Envelope
			rep := validateReport{File: args[0], Valid: true, Audience: r.Audience, Host: e.Host, ServiceID: e.ServiceID, EnvTag: e.EnvTag,
				PublicationID: e.PublicationID, Release: e.ReleaseVersion, ContentDigest: r.ContentDigest,
				PropertySetDigest: r.PropertySetDigest, ArtifactDigest: r.ArtifactDigest}
			if repo == "" {
				rep.NotChecked = "that the settings and bytes are what was compiled: the file records no digest of its settings; " +
					"pass --repo DIR to compare them with the release manifest"
			} else {
				m, path, err := releaseOf(repo, e.EnvTag)
				if err != nil {
					return err
				}
				if t := m.Target(e.Host, e.ServiceID); e.ReleaseVersion != m.ReleaseVersion && (t == nil || t.PublicationID != e.PublicationID) {
					// The file is of another release than the one the
					// directory holds: the release it names, from Git.
					if m, path, rep.ManifestCommit, err = releaseInHistory(cmd.Context(), args[0], repo, &e, m.ReleaseVersion, path); err != nil {
						return err
					}
				}
				if err := r.CheckCompiled(args[0], path, m); err != nil {
					return err
				}
				rep.Manifest = path
			}
			return report(cmd, rep, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s: valid %s artifact for %s/%s/%s\n  publicationId %s release %d\n  contentDigest     %s\n  propertySetDigest %s\n  artifactDigest    %s\n",
					rep.File, rep.Audience, rep.Host, rep.ServiceID, rep.EnvTag, rep.PublicationID, rep.Release, rep.ContentDigest, rep.PropertySetDigest, rep.ArtifactDigest)
				if err != nil {
					return err
				}
				if rep.ManifestCommit != "" {
					_, err = fmt.Fprintf(w, "  as compiled: settings, namespace and bytes are the ones release %d records (%s at commit %s, read from the Git history: the directory holds another release)\n",
						rep.Release, rep.Manifest, rep.ManifestCommit)
				} else if rep.Manifest != "" {
					_, err = fmt.Fprintf(w, "  as compiled: settings, namespace and bytes are the ones %s records\n", rep.Manifest)
				} else {
					_, err = fmt.Fprintf(w, "  not checked: %s\n", rep.NotChecked)
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&audience, "audience", "", "audience to validate against (default: runtimePolicy.audience)")
	cmd.Flags().StringVar(&repo, "repo", "", "policy repository whose release manifest the file must match (releases/ENV.yaml)")
	outputFlag(cmd)
	root.AddCommand(cmd)
}

// releaseOf reads the release of env that the policy repository repo holds
// (its root and shards), returning it and the root's path.
func releaseOf(repo, env string) (*bundle.Manifest, string, error) {
	tree, err := policytree.Dir(repo, policytree.Limits{})
	if err != nil {
		return nil, "", err
	}
	defer tree.Close()
	path := compiler.ManifestPath(env)
	b, err := compiler.CommittedRelease(tree, env)
	if err != nil {
		return nil, "", err
	}
	if b == nil {
		return nil, "", fmt.Errorf("%s has no %s: the file's environment %s has no release there to compare it with", repo, path, env)
	}
	m, err := bundle.ParseManifest(path, b)
	if err != nil {
		return nil, "", err
	}
	return m, path, nil
}

// releaseInHistory reads the release of e's environment that file (an
// artifact of publication e.PublicationID, release e.ReleaseVersion) names
// from the first-parent history of HEAD of the Git repository that
// contains repo, which holds release held (its root at path). It returns
// that release, the root's path and the commit it was read at; when repo is
// not in a Git repository or the history does not hold the release, an
// error naming the release the file is of and the one repo holds.
func releaseInHistory(ctx context.Context, file, repo string, e *bundle.RuntimePolicy, held int64, path string) (*bundle.Manifest, string, string, error) {
	v := e.ReleaseVersion
	of := fmt.Sprintf("%s: the file is target %s/%s's publication %s of release %d of %s; %s holds release %d (%s)",
		file, e.Host, e.ServiceID, e.PublicationID, v, e.EnvTag, repo, held, path)
	fsys, commit, err := gitfs.FindRelease(ctx, repo, "HEAD", e.EnvTag, v)
	switch {
	case errors.Is(err, gitfs.ErrNotRepository):
		return nil, "", "", fmt.Errorf("%s, and is not in a Git repository, so release %d cannot be read from its history: "+
			"validate the file with --repo a checkout of the commit that holds release %d (or a Git clone of the policy repository)", of, v, v)
	case err != nil && v > held:
		return nil, "", "", fmt.Errorf("%s, older than the file's (pull, or check out the commit that holds release %d): %w", of, v, err)
	case err != nil:
		return nil, "", "", fmt.Errorf("%s, and release %d cannot be read from its Git history: %w", of, v, err)
	}
	b, err := compiler.CommittedRelease(fsys, e.EnvTag)
	if err != nil {
		return nil, "", "", fmt.Errorf("release %d of %s at %s: %w", v, e.EnvTag, commit[:12], err)
	}
	m, err := bundle.ParseManifest(path, b)
	if err != nil {
		return nil, "", "", fmt.Errorf("release %d of %s at %s: %w", v, e.EnvTag, commit[:12], err)
	}
	return m, path, commit, nil
}

// validateReport is what validate prints with --output json. A file that
// is not valid exits 1 with the reasons on stderr and prints no report.
type validateReport struct {
	File              string `json:"file"`
	Valid             bool   `json:"valid"`
	Audience          string `json:"audience"`
	Host              string `json:"host"`
	ServiceID         string `json:"serviceId"`
	EnvTag            string `json:"envTag"`
	PublicationID     string `json:"publicationId"`
	Release           int64  `json:"release"`
	ContentDigest     string `json:"contentDigest"`
	PropertySetDigest string `json:"propertySetDigest"`
	ArtifactDigest    string `json:"artifactDigest"`
	// Manifest is the release manifest the file was compared with
	// (--repo), NotChecked what was not checked without it.
	Manifest   string `json:"manifest,omitempty"`
	NotChecked string `json:"notChecked,omitempty"`
	// ManifestCommit is the commit Manifest was read at when the file is
	// of an older release than the one the directory holds (read from
	// its Git history); absent when the directory's own release matched.
	ManifestCommit string `json:"manifestCommit,omitempty"`
}
