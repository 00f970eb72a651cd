package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/configpub/configpub/registry"
)

// outputJSON reports whether the verb was asked for --output json.
func outputJSON(cmd *cobra.Command) bool {
	o, _ := cmd.Flags().GetString("output")
	return o == "json"
}

// publishReport is what publish prints with --output json (field names are
// stable; docs/cli-output.md lists them). Every ref is a pasteable
// REPOSITORY@sha256:<hex> reference that pull and verify-oci accept.
type publishReport struct {
	EnvTag   string `json:"envTag"`
	Release  int64  `json:"release"`
	Registry string `json:"registry"`
	// OCILayout is --oci-layout: the artifacts were written there, for
	// Registry, and nothing was pushed.
	OCILayout       string `json:"ociLayout,omitempty"`
	KeyID           string `json:"keyId"`
	ReleaseArtifact string `json:"releaseArtifact,omitempty"`
	// AlreadyPublished: the release artifact was in place, so nothing else
	// was checked (see --recheck).
	AlreadyPublished bool `json:"alreadyPublished,omitempty"`
	// Compiled: the release was compiled (and found up to date). False when
	// its artifact was found in place from the committed files first.
	Compiled       bool                `json:"compiled"`
	Pushed         int                 `json:"pushed"`
	AlreadyPresent int                 `json:"alreadyPresent"`
	BytesUploaded  int64               `json:"bytesUploaded"`
	Artifacts      []publishedArtifact `json:"artifacts"`
}

// publishedArtifact is one artifact of a publishReport.
type publishedArtifact struct {
	Kind          string `json:"kind"` // values | release
	Ref           string `json:"ref"`
	Tag           string `json:"tag"`
	Pushed        bool   `json:"pushed"`
	BytesUploaded int64  `json:"bytesUploaded"`
}

func newPublishReport(env string, release int64, prefix, keyID string, sum *registry.Summary, results []registry.Result) *publishReport {
	// Published in no fixed order: listed by repository, the release last.
	sort.Slice(results, func(i, j int) bool {
		a, b := results[i], results[j]
		if (a.Kind == registry.KindRelease) != (b.Kind == registry.KindRelease) {
			return b.Kind == registry.KindRelease
		}
		return a.Repository < b.Repository
	})
	r := &publishReport{EnvTag: env, Release: release, Registry: prefix, KeyID: keyID,
		Pushed: sum.Pushed, AlreadyPresent: sum.AlreadyPresent, BytesUploaded: sum.Bytes,
		Artifacts: make([]publishedArtifact, 0, len(results))}
	for _, res := range results {
		r.Artifacts = append(r.Artifacts, publishedArtifact{Kind: res.Kind, Ref: res.Ref(), Tag: res.Tag, Pushed: res.Pushed, BytesUploaded: res.Bytes})
		if res.Kind == registry.KindRelease {
			r.ReleaseArtifact = res.Ref()
		}
	}
	return r
}

// reportPublished reports a release whose release artifact r was found in
// place (nothing else checked), found before (compiled false) or after the
// compile.
func reportPublished(cmd *cobra.Command, env string, release int64, prefix, layout, keyID string, r registry.Result, compiled bool) error {
	rep := newPublishReport(env, release, prefix, keyID, &registry.Summary{AlreadyPresent: 1}, []registry.Result{r})
	rep.AlreadyPublished, rep.Compiled, rep.OCILayout = true, compiled, layout
	return report(cmd, rep, rep.text)
}

func (r *publishReport) text(w io.Writer) error {
	if r.AlreadyPublished {
		what := "nothing checked but the release artifact"
		if !r.Compiled {
			what = "found from the committed release's files: nothing compiled or checked but the release artifact"
		}
		where := r.Registry
		if r.OCILayout != "" {
			where = fmt.Sprintf("the OCI layout %s (for %s)", r.OCILayout, r.Registry)
		}
		_, err := fmt.Fprintf(w, "release %s/%d is already published to %s: %s (%s; --recheck checks every artifact)\n",
			r.EnvTag, r.Release, where, r.ReleaseArtifact, what)
		return err
	}
	if r.OCILayout != "" {
		if _, err := fmt.Fprintf(w, "release %s/%d: %d artifacts written to the OCI layout %s for %s, nothing pushed: %d written, %d already present, %d bytes (key %s); "+
			"copy each directory's two tags with oras cp --from-oci-layout DIR:TAG %s/...:TAG\n",
			r.EnvTag, r.Release, r.Pushed+r.AlreadyPresent, r.OCILayout, r.Registry, r.Pushed, r.AlreadyPresent, r.BytesUploaded, r.KeyID, r.Registry); err != nil {
			return err
		}
	} else if _, err := fmt.Fprintf(w, "release %s/%d: %d artifacts published to %s: %d pushed, %d already present, %d bytes uploaded (key %s)\n",
		r.EnvTag, r.Release, r.Pushed+r.AlreadyPresent, r.Registry, r.Pushed, r.AlreadyPresent, r.BytesUploaded, r.KeyID); err != nil {
		return err
	}
	if r.ReleaseArtifact == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "release artifact: %s\n", r.ReleaseArtifact)
	return err
}
