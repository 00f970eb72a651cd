package promoter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/yamlstrict"
)

// Workflow view states reported by Status.
const (
	// WorkflowViewPinnable: the view is recorded and its publication is not
	// revoked; the Workflow service may admit work against it.
	WorkflowViewPinnable = bundle.WorkflowViewPinnable
	// WorkflowViewRevoked: the view's publication is revoked; no new work
	// may be admitted against it.
	WorkflowViewRevoked = bundle.WorkflowViewRevoked
)

// WorkflowView is the compiled internal Workflow view of one PUBLISHED
// workflow version (compiler.WorkflowView): Values is its configpub-yaml/1
// document ("workflowPolicy: ..."), PolicyDigest the digest of that view
// without its policyDigest field.
type WorkflowView struct {
	Name, WfDefID, Version, State  string
	DefinitionDigest, PolicyDigest string
	Values                         []byte
}

// WorkflowViewsOf converts the compiler's views.
func WorkflowViewsOf(vs []compiler.WorkflowView) []WorkflowView {
	out := make([]WorkflowView, len(vs))
	for i, v := range vs {
		out[i] = WorkflowView{Name: v.Name, WfDefID: v.WfDefID, Version: v.Version, State: v.State,
			DefinitionDigest: v.DefinitionDigest, PolicyDigest: v.PolicyDigest, Values: v.Values}
	}
	return out
}

// viewRow is a view ready to store: the document's fields as canonical JSON.
type viewRow struct {
	v                                                       *WorkflowView
	compat                                                  int64
	limits, approvals, agents, tools, runner, retention, ep []byte
}

// StageWorkflowViews stores the views the release whose manifest is
// manifest carries, before the release is recorded: the activation that
// moves the release's pointers then records them with the release's
// publication (and a rollback or re-activation records nothing new). There
// must be exactly one view per PUBLISHED workflow version of the manifest,
// with the manifest's definition digest, and none for a DRAFT; every view's
// digest is recomputed from its document. Staging is idempotent; a view or
// stage that exists with other content is ErrIntegrity.
func (s *Store) StageWorkflowViews(ctx context.Context, manifest []byte, views []WorkflowView) error {
	rows, err := checkViews(manifest, views)
	if err != nil {
		return fmt.Errorf("stage workflow views: %w", err)
	}
	if len(rows) == 0 {
		return nil
	}
	hash := digest.FromBytes(manifest).String()
	err = s.runTx(ctx, func(tx pgx.Tx) error { return insertViews(ctx, tx, hash, rows) })
	if err != nil {
		return fmt.Errorf("stage workflow views: %w", err)
	}
	return nil
}

// checkViews matches views against the manifest's workflow versions and
// decodes each document.
func checkViews(manifest []byte, views []WorkflowView) ([]viewRow, error) {
	m, err := bundle.ParseManifest("release manifest", manifest)
	if err != nil {
		return nil, err
	}
	published := map[string]string{} // wfDefId@version -> digest
	for _, w := range m.Workflows {
		if w.State == "PUBLISHED" {
			published[w.WfDefID+"@"+w.Version] = w.Digest
		}
	}
	rows := make([]viewRow, 0, len(views))
	seen := map[string]bool{}
	for i := range views {
		v := &views[i]
		key := v.WfDefID + "@" + v.Version
		want, ok := published[key]
		switch {
		case v.State != "PUBLISHED":
			return nil, invalid("workflow view", "%s@%s is %s: only PUBLISHED versions have a view", v.Name, v.Version, v.State)
		case !ok:
			return nil, fmt.Errorf("workflow view %s@%s: not a PUBLISHED version of release %d: %w", v.Name, v.Version, m.ReleaseVersion, ErrIntegrity)
		case want != v.DefinitionDigest:
			return nil, fmt.Errorf("workflow view %s@%s: definition digest %s, release manifest %s: %w", v.Name, v.Version, v.DefinitionDigest, want, ErrIntegrity)
		case seen[key]:
			return nil, invalid("workflow view", "%s@%s appears twice", v.Name, v.Version)
		}
		seen[key] = true
		r, err := decodeView(v)
		if err != nil {
			return nil, fmt.Errorf("workflow view %s@%s: %w", v.Name, v.Version, err)
		}
		rows = append(rows, r)
	}
	for key := range published {
		if !seen[key] {
			return nil, invalid("workflow views", "PUBLISHED version %s of release %d has no view", key, m.ReleaseVersion)
		}
	}
	return rows, nil
}

// decodeView parses a view document, checks its identity fields and
// recomputes its digest.
func decodeView(v *WorkflowView) (viewRow, error) {
	doc, err := yamlstrict.ParseValue("workflow view", v.Values)
	if err != nil {
		return viewRow{}, err
	}
	wp := doc.Get("workflowPolicy")
	if wp == nil || wp.Kind != render.KindMap || doc.Len() != 1 {
		return viewRow{}, invalid("values", "want one workflowPolicy map")
	}
	str := func(k string) string {
		if x := wp.Get(k); x != nil && x.Kind == render.KindString {
			return x.Str
		}
		return ""
	}
	for _, f := range []struct{ k, want string }{
		{"workflow", v.Name}, {"wfDefId", v.WfDefID}, {"version", v.Version}, {"state", v.State},
		{"definitionDigest", v.DefinitionDigest}, {"policyDigest", v.PolicyDigest},
	} {
		if got := str(f.k); got != f.want {
			return viewRow{}, fmt.Errorf("document %s %q, view %q: %w", f.k, got, f.want, ErrIntegrity)
		}
	}
	body := wp.Clone()
	body.Delete("policyDigest")
	d, err := render.Digest(body)
	if err != nil {
		return viewRow{}, err
	}
	if d != v.PolicyDigest {
		return viewRow{}, fmt.Errorf("document digest %s, view policyDigest %s: %w", d, v.PolicyDigest, ErrIntegrity)
	}
	r := viewRow{v: v}
	if c := wp.Get("compatibilityGeneration"); c != nil && c.Kind == render.KindInt {
		r.compat = c.Int
	}
	for _, f := range []struct {
		k   string
		dst *[]byte
	}{
		{"limits", &r.limits}, {"approvals", &r.approvals}, {"agents", &r.agents}, {"tools", &r.tools},
		{"runner", &r.runner}, {"retention", &r.retention}, {"endpointTargets", &r.ep},
	} {
		x := wp.Get(f.k)
		if x == nil {
			return viewRow{}, invalid("values", "workflowPolicy.%s missing", f.k)
		}
		if *f.dst, err = render.Canonical(x); err != nil {
			return viewRow{}, err
		}
	}
	return r, nil
}

func insertViews(ctx context.Context, tx pgx.Tx, hash string, rows []viewRow) error {
	for _, r := range rows {
		v := r.v
		docDigest := digest.FromBytes(v.Values).String()
		if _, err := tx.Exec(ctx, `INSERT INTO configpub.workflow_view (view_digest, wf_def_id, version, workflow, state,
				definition_digest, compatibility_generation, limits, approvals, agents, tools, runner, retention,
				endpoint_targets, document, document_digest)
			VALUES ($1, $2::text::uuid, $3, $4, $5, $6, $7, $8::text::jsonb, $9::text::jsonb, $10::text::jsonb,
				$11::text::jsonb, $12::text::jsonb, $13::text::jsonb, $14::text::jsonb, $15, $16)
			ON CONFLICT (view_digest) DO NOTHING`,
			v.PolicyDigest, v.WfDefID, v.Version, v.Name, v.State, v.DefinitionDigest, r.compat, string(r.limits),
			string(r.approvals), string(r.agents), string(r.tools), string(r.runner), string(r.retention), string(r.ep),
			v.Values, docDigest); err != nil {
			return dbErr("insert workflow view", err)
		}
		var stored []byte
		if err := tx.QueryRow(ctx, `SELECT document FROM configpub.workflow_view WHERE view_digest = $1`, v.PolicyDigest).Scan(&stored); err != nil {
			return dbErr("read workflow view", err)
		}
		if !bytes.Equal(stored, v.Values) {
			return fmt.Errorf("workflow view %s is stored with another document: %w", v.PolicyDigest, ErrIntegrity)
		}
		var staged string
		err := tx.QueryRow(ctx, `WITH ins AS (
				INSERT INTO configpub.workflow_view_stage (definition_hash, wf_def_id, version, view_digest)
				VALUES ($1, $2::text::uuid, $3, $4) ON CONFLICT DO NOTHING RETURNING view_digest)
			SELECT view_digest FROM ins
			UNION ALL
			SELECT view_digest FROM configpub.workflow_view_stage
			WHERE definition_hash = $1 AND wf_def_id = $2::text::uuid AND version = $3`,
			hash, v.WfDefID, v.Version, v.PolicyDigest).Scan(&staged)
		if err != nil {
			return dbErr("stage workflow view", err)
		}
		if staged != v.PolicyDigest {
			return fmt.Errorf("release %s stages %s@%s as %s, not %s: %w", hash, v.WfDefID, v.Version, staged, v.PolicyDigest, ErrIntegrity)
		}
	}
	return nil
}

// recordWorkflowViews runs inside the activation transaction of release
// envTag/version: it records the release's staged views with the release's
// publication identity (that of the snapshots the release created; when it
// created none, the publicationId the compiler derives for the release) and
// the accepted {publicationId, policyDigest} of every Agent each view
// allows, from the release's own Agent snapshots. A release whose views are
// recorded (a rollback or forward activation) gets nothing new and no
// recorded view changes.
//
// The statement reads the release's targets once, whatever the number of
// views: the Agent snapshots are joined to the (view, allowed Agent) pairs
// in one hash join and grouped per view. Correlating that read with each
// view cost views × targets rows (2,000 × 100,000 in a generated release),
// minutes inside the activation transaction.
func recordWorkflowViews(ctx context.Context, tx pgx.Tx, envTag string, version int64, cmdID string, now time.Time) error {
	_, err := tx.Exec(ctx, recordWorkflowViewsSQL, envTag, version, cmdID, now, bundle.PublicationID(envTag, version))
	if err != nil {
		return dbErr("record workflow views", err)
	}
	return nil
}

// recordWorkflowViewsSQL: $1 env_tag, $2 release_version, $3 command_id,
// $4 recorded_at, $5 the release's derived publicationId. rel is empty when
// the release's views are recorded already (they are recorded together), so
// a rollback to it reads nothing else.
const recordWorkflowViewsSQL = `WITH rel AS MATERIALIZED (
		SELECT r.env_tag, r.release_version, r.release_digest, r.definition_hash
		FROM configpub.config_release r
		WHERE r.env_tag = $1 AND r.release_version = $2
		  AND NOT EXISTS (SELECT 1 FROM configpub.workflow_release_view x
			WHERE x.env_tag = $1 AND x.release_version = $2)),
	views AS MATERIALIZED (
		SELECT st.wf_def_id, st.version, st.view_digest, v.agents
		FROM rel
		JOIN configpub.workflow_view_stage st ON st.definition_hash = rel.definition_hash
		JOIN configpub.workflow_view v ON v.view_digest = st.view_digest),
	snap AS MATERIALIZED (
		SELECT s.subject_name, s.host, s.service_id, s.publication_id, s.policy_digest, s.audience, s.release_version
		FROM configpub.config_release_target rt
		JOIN configpub.config_snapshot s ON s.snapshot_id = rt.snapshot_id
		WHERE rt.env_tag = $1 AND rt.release_version = $2 AND EXISTS (SELECT 1 FROM views)),
	allowed AS (
		SELECT DISTINCT vw.wf_def_id, vw.version, a->>'name' AS subject_name
		FROM views vw CROSS JOIN LATERAL jsonb_array_elements(vw.agents) a),
	accepted AS (
		SELECT al.wf_def_id, al.version, jsonb_agg(jsonb_build_object('agent', s.subject_name, 'host', s.host,
				'serviceId', s.service_id, 'publicationId', s.publication_id::text, 'policyDigest', s.policy_digest)
				ORDER BY s.subject_name, s.host, s.service_id) AS publications
		FROM allowed al
		JOIN snap s ON s.audience = 'agent' AND s.subject_name = al.subject_name
		GROUP BY al.wf_def_id, al.version),
	pub AS (
		SELECT coalesce((SELECT publication_id FROM snap WHERE release_version = $2
			ORDER BY publication_id LIMIT 1), $5::text::uuid) AS publication_id)
	INSERT INTO configpub.workflow_release_view (env_tag, release_version, wf_def_id, version, view_id, view_digest,
		publication_id, release_digest, definition_hash, accepted_publications, command_id, recorded_at)
	SELECT rel.env_tag, rel.release_version, vw.wf_def_id, vw.version,
		md5('configpub/workflow-view/v1' || '|' || rel.env_tag || '|' || rel.release_version::text || '|' ||
			vw.wf_def_id::text || '|' || vw.version)::uuid,
		vw.view_digest, pub.publication_id, rel.release_digest, rel.definition_hash,
		coalesce(ac.publications, '[]'::jsonb), $3::text::uuid, $4
	FROM rel
	CROSS JOIN views vw
	CROSS JOIN pub
	LEFT JOIN accepted ac ON ac.wf_def_id = vw.wf_def_id AND ac.version = vw.version
	ON CONFLICT (env_tag, release_version, wf_def_id, version) DO NOTHING`

// WorkflowViewStatus is one recorded Workflow view of a release.
type WorkflowViewStatus struct {
	ReleaseVersion   int64     `json:"releaseVersion"`
	Workflow         string    `json:"workflow"`
	WfDefID          string    `json:"wfDefId"`
	Version          string    `json:"version"`
	ViewID           string    `json:"viewId"`
	ViewDigest       string    `json:"viewDigest"`
	DefinitionDigest string    `json:"definitionDigest"`
	PublicationID    string    `json:"publicationId"`
	Current          bool      `json:"current"` // of the environment's current release
	State            string    `json:"state"`   // PINNABLE or REVOKED
	RecordedAt       time.Time `json:"recordedAt"`
}

// WorkflowViews lists envTag's recorded Workflow views, by release then
// workflow and version.
func (s *Store) WorkflowViews(ctx context.Context, envTag string) ([]WorkflowViewStatus, error) {
	out, err := workflowViews(ctx, s.pool, envTag)
	if err != nil {
		return nil, fmt.Errorf("workflow views %s: %w", envTag, err)
	}
	return out, nil
}

type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func workflowViews(ctx context.Context, q rowsQuerier, envTag string) ([]WorkflowViewStatus, error) {
	rows, err := q.Query(ctx, `SELECT h.release_version, h.workflow, h.wf_def_id::text, h.version, h.view_id::text,
			h.view_digest, h.definition_digest, h.publication_id::text,
			coalesce(e.current_release_version = h.release_version, false), h.publication_revoked, h.recorded_at
		FROM configpub_workflow.workflow_view_history h
		LEFT JOIN configpub.environment e ON e.env_tag = h.env_tag
		WHERE h.env_tag = $1
		ORDER BY h.release_version, h.workflow, h.version`, envTag)
	if err != nil {
		return nil, dbErr("read workflow views", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WorkflowViewStatus, error) {
		var w WorkflowViewStatus
		var revoked bool
		err := row.Scan(&w.ReleaseVersion, &w.Workflow, &w.WfDefID, &w.Version, &w.ViewID, &w.ViewDigest,
			&w.DefinitionDigest, &w.PublicationID, &w.Current, &revoked, &w.RecordedAt)
		w.State = WorkflowViewPinnable
		if revoked {
			w.State = WorkflowViewRevoked
		}
		w.RecordedAt = w.RecordedAt.UTC()
		return w, err
	})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, dbErr("read workflow views", err)
	}
	if out == nil {
		out = []WorkflowViewStatus{}
	}
	return out, nil
}
