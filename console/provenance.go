package console

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
)

// WorkflowView is a Workflow view recorded when a release was activated:
// PINNABLE (Workflow may admit work against it) or REVOKED (its
// publication is revoked). Only metadata: never the view document.
type WorkflowView struct {
	Workflow         string `json:"workflow"`
	WfDefID          string `json:"wfDefId"`
	Version          string `json:"version"`
	ViewID           string `json:"viewId"`
	ViewDigest       string `json:"viewDigest"`
	DefinitionDigest string `json:"definitionDigest"`
	PublicationID    string `json:"publicationId"`
	State            string `json:"state"`
}

// workflowViewsListed bounds the Workflow views a release page lists (by
// workflow and version); a generated release of 100,000 targets has 2,000.
const workflowViewsListed = 200

// workflowViews reads the first workflowViewsListed Workflow views recorded
// for release v of env and how many there are (none on a database without
// configpub_workflow.workflow_view_summary).
func (r *reader) workflowViews(ctx context.Context, env string, v int64) ([]WorkflowView, int, error) {
	if !r.f.workflow {
		return []WorkflowView{}, 0, nil
	}
	rows, err := r.q.Query(ctx, `SELECT workflow, wf_def_id::text, version, view_id::text, view_digest,
			definition_digest, publication_id::text, publication_revoked, count(*) OVER ()
		FROM configpub_workflow.workflow_view_summary WHERE env_tag = $1 AND release_version = $2
		ORDER BY workflow, version LIMIT $3`, env, v, workflowViewsListed)
	if err != nil {
		return nil, 0, fmt.Errorf("release %s/%d: workflow views: %w", env, v, err)
	}
	total := 0
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WorkflowView, error) {
		var w WorkflowView
		var revoked bool
		err := row.Scan(&w.Workflow, &w.WfDefID, &w.Version, &w.ViewID, &w.ViewDigest, &w.DefinitionDigest,
			&w.PublicationID, &revoked, &total)
		w.State = bundle.WorkflowViewPinnable
		if revoked {
			w.State = bundle.WorkflowViewRevoked
		}
		return w, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("release %s/%d: workflow views: %w", env, v, err)
	}
	if out == nil {
		out = []WorkflowView{}
	}
	return out, total, nil
}

// parseRepositoryURL checks Options.RepositoryURL: an absolute http(s)
// address without query or fragment, returned without a trailing slash.
func parseRepositoryURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: repository URL %q: want an http(s) address such as https://github.com/org/policies", ErrConfig, s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

var (
	commitHash = regexp.MustCompile(`^[0-9a-f]{7,64}$`)
	pullRef    = regexp.MustCompile(`^refs/pull/([0-9]+)/(head|merge)$`)
)

// links returns the web addresses of a release's reviewed commit and, when
// its ref names one, pull request, under repository (GitHub's and GitLab's
// /commit/<hash> form; GitHub's /pull/<n>). Nothing without a repository or
// a commit hash.
func links(repository, commit, ref string) (commitURL, pullURL string) {
	if repository == "" {
		return "", ""
	}
	if commitHash.MatchString(commit) {
		commitURL = repository + "/commit/" + commit
	}
	if m := pullRef.FindStringSubmatch(ref); m != nil {
		pullURL = repository + "/pull/" + m[1]
	}
	return commitURL, pullURL
}
