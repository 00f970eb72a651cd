-- workflowsvc/schema.sql as of commit 7756c48, before the caller columns
-- (caller_host, caller_service_id, caller_publication_id, caller_policy_digest)
-- and invocation_caller_whole: the schema a database upgraded by Migrate
-- had (TestMigrateUpgradesTheSchemaBeforeCallers). Never edit it.

-- The Workflow service's own operational schema, separate from configpub.
-- Applied by workflowsvc.Migrate as the database owner (idempotent).
--
-- configpub_workflow_service is the service's role: it reads recorded
-- Workflow views through configpub_workflow_reader (membership) and inserts
-- invocations, their pinned endpoint targets and dispatches here. It updates
-- and deletes nothing: admitted work is immutable.
-- Roles are cluster-wide: create the role and the membership only when they
-- are missing (an owner without CREATEROLE then works once an administrator
-- created them), tolerating another database of the cluster doing the same
-- concurrently.
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'configpub_workflow_service') THEN
		BEGIN
			CREATE ROLE configpub_workflow_service NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS;
		EXCEPTION WHEN duplicate_object OR unique_violation OR internal_error THEN
			NULL;
		END;
	END IF;
	IF NOT pg_has_role('configpub_workflow_service', 'configpub_workflow_reader', 'MEMBER') THEN
		BEGIN
			GRANT configpub_workflow_reader TO configpub_workflow_service;
		EXCEPTION WHEN duplicate_object OR unique_violation OR internal_error THEN
			NULL;
		END;
	END IF;
END
$$;

CREATE SCHEMA IF NOT EXISTS workflowsvc;
REVOKE ALL ON SCHEMA workflowsvc FROM PUBLIC;

CREATE OR REPLACE FUNCTION workflowsvc.refuse_mutation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'workflowsvc.% is append-only: % refused', TG_TABLE_NAME, TG_OP USING ERRCODE = 'WF001';
END
$$;

-- One admitted invocation, pinned to the recorded view it was admitted
-- under.
CREATE TABLE IF NOT EXISTS workflowsvc.invocation (
	invocation_id             uuid PRIMARY KEY,
	env_tag                   text NOT NULL,
	wf_def_id                 uuid NOT NULL,
	version                   text NOT NULL,
	binding                   text NOT NULL CHECK (binding <> ''),
	view_id                   uuid NOT NULL,
	view_digest               text NOT NULL CHECK (view_digest ~ '^sha256:[0-9a-f]{64}$'),
	definition_digest         text NOT NULL,
	publication_id            uuid NOT NULL,
	release_version           bigint NOT NULL,
	compatibility_generation  bigint NOT NULL,
	limits                    jsonb NOT NULL,
	admitted_at               timestamptz NOT NULL
);

-- The binding-scoped endpoint target set, copied at admission: dispatch
-- reads only this.
CREATE TABLE IF NOT EXISTS workflowsvc.invocation_endpoint_target (
	invocation_id  uuid NOT NULL REFERENCES workflowsvc.invocation (invocation_id),
	service_id     text NOT NULL CHECK (service_id <> ''),
	PRIMARY KEY (invocation_id, service_id)
);

CREATE TABLE IF NOT EXISTS workflowsvc.dispatch (
	dispatch_id    bigserial PRIMARY KEY,
	invocation_id  uuid NOT NULL,
	service_id     text NOT NULL,
	operation      text NOT NULL,
	dispatched_at  timestamptz NOT NULL,
	FOREIGN KEY (invocation_id, service_id) REFERENCES workflowsvc.invocation_endpoint_target (invocation_id, service_id)
);

DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['invocation', 'invocation_endpoint_target', 'dispatch'] LOOP
		IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = t || '_append_only') THEN
			EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON workflowsvc.%I FOR EACH ROW EXECUTE FUNCTION workflowsvc.refuse_mutation()', t || '_append_only', t);
			EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON workflowsvc.%I FOR EACH STATEMENT EXECUTE FUNCTION workflowsvc.refuse_mutation()', t || '_no_truncate', t);
		END IF;
	END LOOP;
END
$$;

GRANT USAGE ON SCHEMA workflowsvc TO configpub_workflow_service;
GRANT SELECT, INSERT ON workflowsvc.invocation, workflowsvc.invocation_endpoint_target, workflowsvc.dispatch
	TO configpub_workflow_service;
GRANT USAGE ON SEQUENCE workflowsvc.dispatch_dispatch_id_seq TO configpub_workflow_service;
