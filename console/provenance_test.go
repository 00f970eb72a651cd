package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/pgtest"
)

// TestReleasePageListsWorkflowViewsAndLinksTheCommit records two Workflow
// views for release 2 (one of a revoked publication) as the promoter's
// activation would, and reads them through the viewer role on the release
// page and its API, with the reviewed commit linked to the repository.
func TestReleasePageListsWorkflowViewsAndLinksTheCommit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	owner := db.Pool(t)
	ctx := context.Background()
	generate(t, owner, generated{env: "dev", targets: 6, releases: 2, changed: 2})
	for i, w := range []struct{ workflow, version, publication string }{
		{"account-onboarding", "1.0.0", "00000000-0000-4000-8000-000000000001"},
		{"account-onboarding", "1.1.0", "00000000-0000-4000-8000-000000000002"},
	} {
		doc := `{"workflow":"` + w.workflow + `","version":"` + w.version + `","secret":"view-document-body"}`
		if _, err := owner.Exec(ctx, `INSERT INTO configpub.workflow_view (view_digest, wf_def_id, version, workflow, state,
				definition_digest, compatibility_generation, limits, approvals, agents, tools, runner, retention,
				endpoint_targets, document, document_digest)
			VALUES ('sha256:' || encode(sha256($4::bytea), 'hex'), '11111111-1111-4111-8111-111111111111', $2, $1, 'PUBLISHED',
				'sha256:' || repeat($3::text, 64), 1, '{}', '[]', '[]', '[]', '{}', '{}', '[]', $4::bytea,
				'sha256:' || encode(sha256($4::bytea), 'hex'))`, w.workflow, w.version, string(rune('a'+i)), doc); err != nil {
			t.Fatal(err)
		}
		if _, err := owner.Exec(ctx, `INSERT INTO configpub.workflow_release_view (env_tag, release_version, wf_def_id, version,
				view_id, view_digest, publication_id, release_digest, definition_hash, accepted_publications, command_id, recorded_at)
			VALUES ('dev', 2, '11111111-1111-4111-8111-111111111111', $1, gen_random_uuid(),
				'sha256:' || encode(sha256($2::bytea), 'hex'), $3, 'sha256:00', 'sha256:00', '[]', gen_random_uuid(), now())`,
			w.version, doc, w.publication); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owner.Exec(ctx, `INSERT INTO configpub.revocation (publication_id, reason, actor, revoked_at)
		VALUES ('00000000-0000-4000-8000-000000000002', 'test', 'test', now())`); err != nil {
		t.Fatal(err)
	}
	var commit string
	if err := owner.QueryRow(ctx, `SELECT source_commit FROM configpub.config_release WHERE env_tag = 'dev' AND release_version = 2`).Scan(&commit); err != nil {
		t.Fatal(err)
	}
	now := releaseAt(2).Add(time.Hour)
	_, f := newTestConsole(t, viewerPool(t, db, false), Options{RepositoryURL: "https://git.example/org/policies/", Now: func() time.Time { return now }})

	page := f.get("/env/dev/releases/2", 200)
	mustContain(t, "release page", page, "Workflow views", "account-onboarding", "1.0.0", "PINNABLE", "1.1.0", "REVOKED",
		`href="https://git.example/org/policies/commit/`+commit+`"`)
	if strings.Contains(page, "view-document-body") {
		t.Error("the release page shows a Workflow view document")
	}
	var d ReleaseDetail
	if err := json.Unmarshal([]byte(f.get("/api/environments/dev/releases/2", 200)), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Workflows) != 2 || d.Workflows[0].State != bundle.WorkflowViewPinnable || d.Workflows[1].State != bundle.WorkflowViewRevoked ||
		d.CommitURL != "https://git.example/org/policies/commit/"+commit {
		t.Errorf("API: got workflows %+v, commit URL %q", d.Workflows, d.CommitURL)
	}
	if got := f.get("/env/dev/releases/1", 200); strings.Contains(got, "Workflow views") {
		t.Error("release 1 lists Workflow views it never recorded")
	}
}

func TestLinks(t *testing.T) {
	const repo = "https://github.com/org/policies"
	hash := strings.Repeat("ab", 20)
	for _, tt := range []struct {
		name, repo, commit, ref, wantCommit, wantPull string
	}{
		{"commit on a branch", repo, hash, "refs/heads/main", repo + "/commit/" + hash, ""},
		{"pull request head", repo, hash, "refs/pull/42/head", repo + "/commit/" + hash, repo + "/pull/42"},
		{"pull request merge", repo, hash, "refs/pull/7/merge", repo + "/commit/" + hash, repo + "/pull/7"},
		{"no repository", "", hash, "refs/pull/42/head", "", ""},
		{"not a hash", repo, "main; rm -rf", "refs/pull/x/head", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, p := links(tt.repo, tt.commit, tt.ref)
			if c != tt.wantCommit || p != tt.wantPull {
				t.Errorf("got %q %q, want %q %q", c, p, tt.wantCommit, tt.wantPull)
			}
		})
	}
	for _, bad := range []string{"javascript:alert(1)", "github.com/org/policies", "https://github.com/org/p?x=1", "https://u:p@github.com/org/p", "ftp://host/p"} {
		if _, err := parseRepositoryURL(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("repository URL %q: got %v, want ErrConfig", bad, err)
		}
	}
}

// TestReleasePageBoundsWorkflowViews: a release with more Workflow views
// than a page lists shows the first workflowViewsListed by workflow and
// version, with the total, on the page and in the API.
func TestReleasePageBoundsWorkflowViews(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	owner := db.Pool(t)
	ctx := context.Background()
	generate(t, owner, generated{env: "dev", targets: 3, releases: 1})
	const n = workflowViewsListed + 3
	if _, err := owner.Exec(ctx, `WITH v AS (
			SELECT i, convert_to(format('{"workflow":"wf-%s"}', lpad(i::text, 4, '0')), 'UTF8') AS doc
			FROM generate_series(1, $1::int) i)
		INSERT INTO configpub.workflow_view (view_digest, wf_def_id, version, workflow, state,
			definition_digest, compatibility_generation, limits, approvals, agents, tools, runner, retention,
			endpoint_targets, document, document_digest)
		SELECT 'sha256:' || encode(sha256(doc), 'hex'), md5('wf' || i)::uuid, '1.0.0', 'wf-' || lpad(i::text, 4, '0'),
			'PUBLISHED', 'sha256:' || repeat('d', 64), 1, '{}', '[]', '[]', '[]', '{}', '{}', '[]', doc,
			'sha256:' || encode(sha256(doc), 'hex')
		FROM v`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, `INSERT INTO configpub.workflow_release_view (env_tag, release_version, wf_def_id, version,
			view_id, view_digest, publication_id, release_digest, definition_hash, accepted_publications, command_id, recorded_at)
		SELECT 'dev', 1, wf_def_id, version, gen_random_uuid(), view_digest, gen_random_uuid(), 'sha256:00', 'sha256:00', '[]',
			gen_random_uuid(), now()
		FROM configpub.workflow_view`); err != nil {
		t.Fatal(err)
	}
	_, f := newTestConsole(t, viewerPool(t, db, false), Options{})
	page := f.get("/env/dev/releases/1", 200)
	mustContain(t, "release page", page, fmt.Sprintf("%d views, the first %d by workflow and version shown", n, workflowViewsListed),
		"wf-0001", fmt.Sprintf("wf-%04d", workflowViewsListed))
	if strings.Contains(page, fmt.Sprintf("wf-%04d", workflowViewsListed+1)) {
		t.Errorf("the release page lists more than %d views", workflowViewsListed)
	}
	var d ReleaseDetail
	if err := json.Unmarshal([]byte(f.get("/api/environments/dev/releases/1", 200)), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Workflows) != workflowViewsListed || d.WorkflowsTotal != n || d.Workflows[0].Workflow != "wf-0001" {
		t.Errorf("API: %d of %d views from %q, want %d of %d from wf-0001", len(d.Workflows), d.WorkflowsTotal,
			d.Workflows[0].Workflow, workflowViewsListed, n)
	}
}
