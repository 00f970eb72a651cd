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

-- The calling Agent admission checked, when the request named one (all
-- four set, or none: requests without a caller are admitted as before).
ALTER TABLE workflowsvc.invocation ADD COLUMN IF NOT EXISTS caller_host text;
ALTER TABLE workflowsvc.invocation ADD COLUMN IF NOT EXISTS caller_service_id text;
ALTER TABLE workflowsvc.invocation ADD COLUMN IF NOT EXISTS caller_publication_id uuid;
ALTER TABLE workflowsvc.invocation ADD COLUMN IF NOT EXISTS caller_policy_digest text;
DO $$
BEGIN
	-- Constraint names are unique per table only: look for this table's.
	IF NOT EXISTS (SELECT 1 FROM pg_constraint
			WHERE conrelid = 'workflowsvc.invocation'::regclass AND conname = 'invocation_caller_whole') THEN
		ALTER TABLE workflowsvc.invocation ADD CONSTRAINT invocation_caller_whole CHECK (
			(caller_host IS NULL AND caller_service_id IS NULL AND caller_publication_id IS NULL AND caller_policy_digest IS NULL)
			OR (caller_host <> '' AND caller_service_id <> '' AND caller_publication_id IS NOT NULL
				AND caller_policy_digest ~ '^sha256:[0-9a-f]{64}$'));
	END IF;
END
$$;

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
		-- Trigger names are unique per table only: look for this table's,
		-- each trigger on its own.
		IF NOT EXISTS (SELECT 1 FROM pg_trigger
				WHERE tgrelid = format('workflowsvc.%I', t)::regclass AND tgname = t || '_append_only') THEN
			EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON workflowsvc.%I FOR EACH ROW EXECUTE FUNCTION workflowsvc.refuse_mutation()', t || '_append_only', t);
		END IF;
		IF NOT EXISTS (SELECT 1 FROM pg_trigger
				WHERE tgrelid = format('workflowsvc.%I', t)::regclass AND tgname = t || '_no_truncate') THEN
			EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON workflowsvc.%I FOR EACH STATEMENT EXECUTE FUNCTION workflowsvc.refuse_mutation()', t || '_no_truncate', t);
		END IF;
	END LOOP;
END
$$;

GRANT USAGE ON SCHEMA workflowsvc TO configpub_workflow_service;
GRANT SELECT, INSERT ON workflowsvc.invocation, workflowsvc.invocation_endpoint_target, workflowsvc.dispatch
	TO configpub_workflow_service;
GRANT USAGE ON SEQUENCE workflowsvc.dispatch_dispatch_id_seq TO configpub_workflow_service;
