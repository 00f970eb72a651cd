// Package workflowsvc is a small internal Workflow service core: it admits
// an invocation by resolving (wfDefId, version) to the immutable Workflow
// view recorded for the environment's current release, copies the view's
// endpoint target set into the service's own schema (workflowsvc) and
// dispatches only from that copy, so a later release or a rollback never
// changes admitted work.
//
// It reads configpub only through the configpub_workflow views (role
// configpub_workflow_reader, which configpub_workflow_service is a member
// of) and writes only its own append-only tables.
package workflowsvc

import (
	"context"
	_ "embed" // schema.sql
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/sqlstate"
)

//go:embed schema.sql
var schemaSQL string

// Migrate creates (or completes) the workflowsvc schema and the
// configpub_workflow_service role. conn must be the database owner and the
// configpub schema must be migrated (the role reads its views).
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('workflowsvc'))"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("workflowsvc: migrate: %w", err)
	}
	return nil
}

// RevokedPolicy says what happens to admitted work whose publication is
// revoked after admission. There is no default: Open refuses the zero value.
type RevokedPolicy int

const (
	// RevokedDeny stops admitted work: Dispatch refuses with ErrRevoked
	// once the pinned view's publication is revoked.
	RevokedDeny RevokedPolicy = iota + 1
	// RevokedDrain lets admitted work finish on its pinned view; only new
	// admissions are refused.
	RevokedDrain
)

func (p RevokedPolicy) String() string {
	switch p {
	case RevokedDeny:
		return "deny"
	case RevokedDrain:
		return "drain"
	}
	return fmt.Sprintf("RevokedPolicy(%d)", int(p))
}

// Errors.
var (
	// ErrNoView: the environment's current release records no view of the
	// requested (wfDefId, version) (a DRAFT, unknown or retired version).
	ErrNoView = errors.New("no recorded workflow view")
	// ErrRevoked: the view's publication is revoked.
	ErrRevoked = errors.New("workflow view publication revoked")
	// ErrBinding: the binding (tool) is not one the view allows.
	ErrBinding = errors.New("binding not allowed by the workflow view")
	// ErrNotPinned: the endpoint is not in the invocation's pinned set.
	ErrNotPinned = errors.New("endpoint not in the invocation's pinned target set")
	// ErrNotFound: no such invocation.
	ErrNotFound = errors.New("invocation not found")
	// ErrConflict: the invocation id was admitted with other parameters.
	ErrConflict = errors.New("invocation id reused with other parameters")
	// ErrViewNotRecorded: under RevokedDeny, the view an invocation is
	// pinned to is not recorded (the configpub database was restored from
	// a backup taken before its release was activated), so its
	// publication's revocation cannot be checked: the call is refused until
	// the release is recorded again.
	ErrViewNotRecorded = errors.New("pinned workflow view not recorded")
	// ErrCallerNotAllowed: the calling Agent (AdmitRequest.Caller) is not
	// one the view allows (no Agent of the view runs at its identity).
	ErrCallerNotAllowed = errors.New("calling agent not allowed by the workflow view")
	// ErrCallerNotCurrent: the calling Agent runs under another
	// {publicationId, policyDigest} than the one the environment's current
	// release maps its identity to (an older or a forged publication).
	ErrCallerNotCurrent = errors.New("calling agent's publication is not the current release's")
	// ErrCallerRevoked: the calling Agent's own snapshot, or its
	// publication, is revoked.
	ErrCallerRevoked = errors.New("calling agent's snapshot or publication revoked")
)

// Options configure a Service.
type Options struct {
	// OnRevoked is the explicit policy for admitted work whose publication
	// is revoked. Required.
	OnRevoked RevokedPolicy
	// Clock stamps admissions and dispatches. Default time.Now.
	Clock func() time.Time
}

// Service admits and dispatches Workflow invocations.
type Service struct {
	pool *pgxpool.Pool
	opts Options
}

// Open returns a Service on pool, which should connect as a member of
// configpub_workflow_service.
func Open(pool *pgxpool.Pool, opts Options) (*Service, error) {
	if opts.OnRevoked != RevokedDeny && opts.OnRevoked != RevokedDrain {
		return nil, fmt.Errorf("workflowsvc: OnRevoked %s: want RevokedDeny or RevokedDrain", opts.OnRevoked)
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Service{pool: pool, opts: opts}, nil
}

// AdmitRequest asks to start a workflow version through a binding.
type AdmitRequest struct {
	InvocationID string // caller-chosen UUID; re-admitting the same request returns the same invocation
	EnvTag       string
	WfDefID      string
	Version      string
	Binding      string // the Tool the invocation came through
	// Caller, when set, is the Agent runtime the invocation is for:
	// admission then also refuses an Agent the view does not allow
	// (ErrCallerNotAllowed), one whose publication is not the one the
	// current release maps it to (ErrCallerNotCurrent), and one whose
	// snapshot or publication is revoked (ErrCallerRevoked). Optional: a request
	// without it is admitted as before, checking the view only.
	Caller *Caller
}

// Caller is the calling Agent runtime of an admission in the request's
// environment: its identity as the service authenticated it (from the
// runtime's token or client certificate, never from a header the caller
// chooses freely) and the publication it runs under (the
// X-Policy-Publication-Id and X-Policy-Digest its runtime client sends,
// checked as the client's VerifyPeer checks them).
type Caller struct {
	Host          string `json:"host"`
	ServiceID     string `json:"serviceId"`
	PublicationID string `json:"publicationId"`
	PolicyDigest  string `json:"policyDigest"`
}

func (c *Caller) validate() error {
	if c.Host == "" || c.ServiceID == "" {
		return errors.New("caller: host and serviceId are required")
	}
	if u, err := uuid.Parse(c.PublicationID); err != nil || u.String() != c.PublicationID {
		return fmt.Errorf("caller publicationId %q is not a lowercase UUID", c.PublicationID)
	}
	if !digestRE.MatchString(c.PolicyDigest) {
		return fmt.Errorf("caller policyDigest %q is not sha256:<64 lowercase hex>", c.PolicyDigest)
	}
	return nil
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// acceptedPublication is one entry of a view's accepted publications: an
// Agent the view allows, at one identity, with the publication and policy
// digest the view's release maps it to.
type acceptedPublication struct {
	Agent         string `json:"agent"`
	Host          string `json:"host"`
	ServiceID     string `json:"serviceId"`
	PublicationID string `json:"publicationId"`
	PolicyDigest  string `json:"policyDigest"`
}

// Invocation is an admitted invocation and what it is pinned to.
type Invocation struct {
	InvocationID            string          `json:"invocationId"`
	EnvTag                  string          `json:"envTag"`
	WfDefID                 string          `json:"wfDefId"`
	Version                 string          `json:"version"`
	Binding                 string          `json:"binding"`
	ViewID                  string          `json:"viewId"`
	ViewDigest              string          `json:"viewDigest"`
	DefinitionDigest        string          `json:"definitionDigest"`
	PublicationID           string          `json:"publicationId"`
	ReleaseVersion          int64           `json:"releaseVersion"`
	CompatibilityGeneration int64           `json:"compatibilityGeneration"`
	Limits                  json.RawMessage `json:"limits"`
	EndpointTargets         []string        `json:"endpointTargets"`
	AdmittedAt              time.Time       `json:"admittedAt"`
	// Caller is the calling Agent admission checked (absent: none given).
	Caller *Caller `json:"caller,omitempty"`
}

func (r *AdmitRequest) validate() error {
	for _, f := range []struct{ name, v string }{{"invocationId", r.InvocationID}, {"wfDefId", r.WfDefID}} {
		if u, err := uuid.Parse(f.v); err != nil || u.String() != f.v {
			return fmt.Errorf("%s %q is not a lowercase UUID", f.name, f.v)
		}
	}
	if r.EnvTag == "" || r.Version == "" || r.Binding == "" {
		return errors.New("envTag, version and binding are required")
	}
	if r.Caller != nil {
		return r.Caller.validate()
	}
	return nil
}

// Admit resolves (WfDefID, Version) to the view recorded for the
// environment's current release, refuses a revoked publication
// (ErrRevoked), an unknown version (ErrNoView), a binding the view does
// not allow (ErrBinding) and, when the request names its Caller, a calling
// Agent the view does not allow, not on the current release's publication,
// or whose snapshot or publication is revoked (ErrCallerNotAllowed,
// ErrCallerNotCurrent, ErrCallerRevoked),
// and records the invocation (with its caller) and a copy of the view's
// endpoint target set in one transaction.
func (s *Service) Admit(ctx context.Context, req AdmitRequest) (*Invocation, error) {
	inv, err := s.admit(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("admit %s@%s in %s (invocation %s): %w", req.WfDefID, req.Version, req.EnvTag, req.InvocationID, err)
	}
	return inv, nil
}

func (s *Service) admit(ctx context.Context, req AdmitRequest) (*Invocation, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	if prior, err := s.Invocation(ctx, req.InvocationID); err == nil {
		if prior.EnvTag != req.EnvTag || prior.WfDefID != req.WfDefID || prior.Version != req.Version || prior.Binding != req.Binding ||
			(prior.Caller == nil) != (req.Caller == nil) || (prior.Caller != nil && *prior.Caller != *req.Caller) {
			return nil, ErrConflict
		}
		return prior, nil
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	inv := Invocation{InvocationID: req.InvocationID, EnvTag: req.EnvTag, WfDefID: req.WfDefID, Version: req.Version, Binding: req.Binding,
		Caller: req.Caller}
	var tools, targets, accepted []byte
	var revoked bool
	err := s.pool.QueryRow(ctx, `SELECT view_id::text, view_digest, definition_digest, publication_id::text,
			release_version, compatibility_generation, limits, tools, endpoint_targets, accepted_publications, publication_revoked
		FROM configpub_workflow.workflow_view_current
		WHERE env_tag = $1 AND wf_def_id = $2::text::uuid AND version = $3`, req.EnvTag, req.WfDefID, req.Version).
		Scan(&inv.ViewID, &inv.ViewDigest, &inv.DefinitionDigest, &inv.PublicationID, &inv.ReleaseVersion,
			&inv.CompatibilityGeneration, &inv.Limits, &tools, &targets, &accepted, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNoView
	}
	if err != nil {
		return nil, fmt.Errorf("read workflow view: %w", err)
	}
	if revoked {
		return nil, fmt.Errorf("publication %s: %w", inv.PublicationID, ErrRevoked)
	}
	var allowed []string
	if err := json.Unmarshal(tools, &allowed); err != nil {
		return nil, fmt.Errorf("view %s tools: %w", inv.ViewID, err)
	}
	if !slices.Contains(allowed, req.Binding) {
		return nil, fmt.Errorf("%q (allowed: %s): %w", req.Binding, strings.Join(allowed, ", "), ErrBinding)
	}
	if req.Caller != nil {
		if err := s.checkCaller(ctx, req.EnvTag, &inv, accepted); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(targets, &inv.EndpointTargets); err != nil {
		return nil, fmt.Errorf("view %s endpoint targets: %w", inv.ViewID, err)
	}
	inv.AdmittedAt = s.opts.Clock().UTC()
	var c Caller
	if inv.Caller != nil {
		c = *inv.Caller
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO workflowsvc.invocation (invocation_id, env_tag, wf_def_id, version,
				binding, view_id, view_digest, definition_digest, publication_id, release_version,
				compatibility_generation, limits, admitted_at,
				caller_host, caller_service_id, caller_publication_id, caller_policy_digest)
			VALUES ($1::text::uuid, $2, $3::text::uuid, $4, $5, $6::text::uuid, $7, $8, $9::text::uuid, $10, $11, $12, $13,
				nullif($14, ''), nullif($15, ''), nullif($16, '')::uuid, nullif($17, ''))`,
			inv.InvocationID, inv.EnvTag, inv.WfDefID, inv.Version, inv.Binding, inv.ViewID, inv.ViewDigest,
			inv.DefinitionDigest, inv.PublicationID, inv.ReleaseVersion, inv.CompatibilityGeneration, inv.Limits,
			inv.AdmittedAt, c.Host, c.ServiceID, c.PublicationID, c.PolicyDigest); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO workflowsvc.invocation_endpoint_target (invocation_id, service_id)
			SELECT $1::text::uuid, unnest($2::text[])`, inv.InvocationID, inv.EndpointTargets)
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == sqlstate.UniqueViolation {
		// Admitted concurrently under the same id: answer as a replay.
		return s.admit(ctx, req)
	}
	if err != nil {
		return nil, fmt.Errorf("record invocation: %w", err)
	}
	return &inv, nil
}

// checkCaller refuses a calling Agent the view does not allow at its
// identity, one whose publication and policy digest are not those the
// view's (the current) release maps its identity to, and one whose
// snapshot or publication is revoked: revoked by its own id (revoke
// --snapshot), or by its publication, whether or not a Workflow view was
// recorded under it (configpub_workflow.revoked_snapshot, migration 30),
// or its publication revoked as the recorded Workflow views of that
// publication say.
func (s *Service) checkCaller(ctx context.Context, env string, inv *Invocation, accepted []byte) error {
	c := inv.Caller
	var list []acceptedPublication
	if err := json.Unmarshal(accepted, &list); err != nil {
		return fmt.Errorf("view %s accepted publications: %w", inv.ViewID, err)
	}
	var mapped *acceptedPublication
	for i := range list {
		if list[i].Host == c.Host && list[i].ServiceID == c.ServiceID {
			mapped = &list[i]
			break
		}
	}
	if mapped == nil {
		return fmt.Errorf("caller %s/%s: no Agent the view allows runs there in release %d: %w", c.Host, c.ServiceID, inv.ReleaseVersion, ErrCallerNotAllowed)
	}
	if mapped.PublicationID != c.PublicationID || mapped.PolicyDigest != c.PolicyDigest {
		return fmt.Errorf("caller %s/%s (Agent %s) runs publication %s with policy %s; release %d maps it to publication %s with policy %s: %w",
			c.Host, c.ServiceID, mapped.Agent, c.PublicationID, c.PolicyDigest, inv.ReleaseVersion, mapped.PublicationID, mapped.PolicyDigest,
			ErrCallerNotCurrent)
	}
	var revoked bool
	err := s.pool.QueryRow(ctx, `SELECT publication_revoked FROM configpub_workflow.workflow_view_history
		WHERE env_tag = $1 AND publication_id = $2::text::uuid LIMIT 1`, env, c.PublicationID).Scan(&revoked)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read the revocation of caller publication %s: %w", c.PublicationID, err)
	}
	if revoked {
		return fmt.Errorf("caller %s/%s (Agent %s), publication %s: %w", c.Host, c.ServiceID, mapped.Agent, c.PublicationID, ErrCallerRevoked)
	}
	var snapshot, by string
	err = s.pool.QueryRow(ctx, `SELECT snapshot_id::text, revoked_by FROM configpub_workflow.revoked_snapshot
		WHERE env_tag = $1 AND host = $2 AND service_id = $3 AND publication_id = $4::text::uuid
		ORDER BY revoked_at LIMIT 1`, env, c.Host, c.ServiceID, c.PublicationID).Scan(&snapshot, &by)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == sqlstate.UndefinedTable:
		// Fail closed: without the view a revoked Agent would be admitted.
		return fmt.Errorf("read the revocation of caller %s/%s: the configpub database is not migrated to version 30 "+
			"(configpub_workflow.revoked_snapshot is missing; run configpub db migrate): %w", c.Host, c.ServiceID, err)
	case err != nil:
		return fmt.Errorf("read the revocation of caller %s/%s snapshot: %w", c.Host, c.ServiceID, err)
	}
	return fmt.Errorf("caller %s/%s (Agent %s), publication %s: its snapshot %s is revoked (by %s): %w",
		c.Host, c.ServiceID, mapped.Agent, c.PublicationID, snapshot, by, ErrCallerRevoked)
}

// Invocation reads an admitted invocation and its pinned endpoint targets
// from the service's own tables.
func (s *Service) Invocation(ctx context.Context, id string) (*Invocation, error) {
	var inv Invocation
	var c Caller
	err := s.pool.QueryRow(ctx, `SELECT invocation_id::text, env_tag, wf_def_id::text, version, binding, view_id::text,
			view_digest, definition_digest, publication_id::text, release_version, compatibility_generation, limits,
			admitted_at,
			coalesce((SELECT array_agg(service_id ORDER BY service_id) FROM workflowsvc.invocation_endpoint_target t
				WHERE t.invocation_id = i.invocation_id), '{}'),
			coalesce(caller_host, ''), coalesce(caller_service_id, ''), coalesce(caller_publication_id::text, ''),
			coalesce(caller_policy_digest, '')
		FROM workflowsvc.invocation i WHERE invocation_id = $1::text::uuid`, id).
		Scan(&inv.InvocationID, &inv.EnvTag, &inv.WfDefID, &inv.Version, &inv.Binding, &inv.ViewID, &inv.ViewDigest,
			&inv.DefinitionDigest, &inv.PublicationID, &inv.ReleaseVersion, &inv.CompatibilityGeneration, &inv.Limits,
			&inv.AdmittedAt, &inv.EndpointTargets, &c.Host, &c.ServiceID, &c.PublicationID, &c.PolicyDigest)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("invocation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read invocation %s: %w", id, err)
	}
	inv.AdmittedAt = inv.AdmittedAt.UTC()
	if c.Host != "" {
		inv.Caller = &c
	}
	return &inv, nil
}

// Dispatch is one recorded call of an admitted invocation.
type Dispatch struct {
	DispatchID   int64     `json:"dispatchId"`
	InvocationID string    `json:"invocationId"`
	ServiceID    string    `json:"serviceId"`
	Operation    string    `json:"operation"`
	DispatchedAt time.Time `json:"dispatchedAt"`
}

// Dispatch records a call ("<serviceId>/<operation>", as in a workflow
// definition) of an admitted invocation. The service id must be in the
// invocation's pinned copy (ErrNotPinned otherwise); nothing is read from
// the current release. Under RevokedDeny a revoked pinned publication
// refuses the call (ErrRevoked), and so does a pinned view that is not
// recorded, whose revocation cannot be checked (ErrViewNotRecorded).
func (s *Service) Dispatch(ctx context.Context, invocationID, call string) (*Dispatch, error) {
	d, err := s.dispatch(ctx, invocationID, call)
	if err != nil {
		return nil, fmt.Errorf("dispatch %s of invocation %s: %w", call, invocationID, err)
	}
	return d, nil
}

func (s *Service) dispatch(ctx context.Context, invocationID, call string) (*Dispatch, error) {
	svc, op, ok := strings.Cut(call, "/")
	if !ok || svc == "" || op == "" {
		return nil, fmt.Errorf("call %q: want <serviceId>/<operation>", call)
	}
	inv, err := s.Invocation(ctx, invocationID)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(inv.EndpointTargets, svc) {
		return nil, fmt.Errorf("%s (pinned: %s): %w", svc, strings.Join(inv.EndpointTargets, ", "), ErrNotPinned)
	}
	if s.opts.OnRevoked == RevokedDeny {
		// Revocation is per publication: the recorded view of the pinned
		// (release, wfDefId, version) answers for the pinned publication
		// even when a restore lost the pinned digest and the release was
		// promoted again from another commit (same view id, publication).
		var revoked bool
		err := s.pool.QueryRow(ctx, `SELECT publication_revoked FROM configpub_workflow.workflow_view_history
			WHERE view_id = $1::text::uuid AND publication_id = $2::text::uuid`, inv.ViewID, inv.PublicationID).Scan(&revoked)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("view %s of release %d (publication %s) is not recorded, so its revocation cannot be checked (policy %s); "+
				"was the configpub database restored from a backup taken before release %d was activated? promote that release again to record it: %w",
				inv.ViewID, inv.ReleaseVersion, inv.PublicationID, s.opts.OnRevoked, inv.ReleaseVersion, ErrViewNotRecorded)
		}
		if err != nil {
			return nil, fmt.Errorf("read pinned view %s: %w", inv.ViewID, err)
		}
		if revoked {
			return nil, fmt.Errorf("publication %s (policy %s): %w", inv.PublicationID, s.opts.OnRevoked, ErrRevoked)
		}
	}
	d := Dispatch{InvocationID: inv.InvocationID, ServiceID: svc, Operation: op, DispatchedAt: s.opts.Clock().UTC()}
	err = s.pool.QueryRow(ctx, `INSERT INTO workflowsvc.dispatch (invocation_id, service_id, operation, dispatched_at)
		VALUES ($1::text::uuid, $2, $3, $4) RETURNING dispatch_id`, d.InvocationID, svc, op, d.DispatchedAt).Scan(&d.DispatchID)
	if err != nil {
		return nil, fmt.Errorf("record dispatch: %w", err)
	}
	return &d, nil
}
