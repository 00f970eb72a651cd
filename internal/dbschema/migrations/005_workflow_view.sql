-- Version 5: the internal Workflow policy view.
--
-- workflow_view holds each compiled view once (content-addressed by its
-- digest); workflow_view_stage says which views the release with a given
-- definition hash carries (written before the release is recorded);
-- workflow_release_view records, in the activation transaction, the view of
-- every PUBLISHED (wfDefId, version) of the activated release with the
-- release's publication identity. All three are append-only.
--
-- configpub_workflow_reader reads the views through the two SQL views of
-- schema configpub_workflow only: every grant it held on configpub tables
-- is revoked.

CREATE TABLE configpub.workflow_view (
	view_digest               text PRIMARY KEY CHECK (view_digest ~ '^sha256:[0-9a-f]{64}$'),
	wf_def_id                 uuid NOT NULL,
	version                   text NOT NULL CHECK (version <> ''),
	workflow                  text NOT NULL CHECK (workflow <> ''),
	state                     text NOT NULL CHECK (state = 'PUBLISHED'),
	definition_digest         text NOT NULL CHECK (definition_digest ~ '^sha256:[0-9a-f]{64}$'),
	compatibility_generation  bigint NOT NULL,
	limits                    jsonb NOT NULL,
	approvals                 jsonb NOT NULL,
	agents                    jsonb NOT NULL,
	tools                     jsonb NOT NULL,
	runner                    jsonb NOT NULL,
	retention                 jsonb NOT NULL,
	endpoint_targets          jsonb NOT NULL CHECK (jsonb_typeof(endpoint_targets) = 'array'),
	document                  bytea NOT NULL,
	document_digest           text NOT NULL CHECK (document_digest = 'sha256:' || encode(sha256(document), 'hex')),
	created_at                timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE configpub.workflow_view_stage (
	definition_hash  text NOT NULL CHECK (definition_hash ~ '^sha256:[0-9a-f]{64}$'),
	wf_def_id        uuid NOT NULL,
	version          text NOT NULL,
	view_digest      text NOT NULL REFERENCES configpub.workflow_view (view_digest),
	PRIMARY KEY (definition_hash, wf_def_id, version)
);

CREATE TABLE configpub.workflow_release_view (
	env_tag                text NOT NULL,
	release_version        bigint NOT NULL,
	wf_def_id              uuid NOT NULL,
	version                text NOT NULL,
	view_id                uuid NOT NULL UNIQUE,
	view_digest            text NOT NULL REFERENCES configpub.workflow_view (view_digest),
	publication_id         uuid NOT NULL,
	release_digest         text NOT NULL,
	definition_hash        text NOT NULL,
	accepted_publications  jsonb NOT NULL CHECK (jsonb_typeof(accepted_publications) = 'array'),
	command_id             uuid NOT NULL,
	recorded_at            timestamptz NOT NULL,
	PRIMARY KEY (env_tag, release_version, wf_def_id, version),
	FOREIGN KEY (env_tag, release_version) REFERENCES configpub.config_release (env_tag, release_version)
);
CREATE INDEX workflow_release_view_digest ON configpub.workflow_release_view (view_digest);

DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['workflow_view', 'workflow_view_stage', 'workflow_release_view'] LOOP
		EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON configpub.%I FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation()', t || '_append_only', t);
		EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON configpub.%I FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation()', t || '_no_truncate', t);
	END LOOP;
END
$$;

GRANT SELECT, INSERT ON configpub.workflow_view, configpub.workflow_view_stage, configpub.workflow_release_view
	TO configpub_promoter;

-- The Workflow reader's only window: every recorded view (history) and the
-- views of each environment's current release (current), with whether the
-- view's publication is revoked.
CREATE SCHEMA configpub_workflow;
REVOKE ALL ON SCHEMA configpub_workflow FROM PUBLIC;

CREATE VIEW configpub_workflow.workflow_view_history AS
SELECT rv.view_id, rv.view_digest, rv.env_tag, rv.release_version, rv.wf_def_id, rv.version, v.workflow, v.state,
	v.definition_digest, rv.publication_id, rv.release_digest, v.compatibility_generation, v.limits, v.approvals,
	v.agents, v.tools, v.runner, v.retention, v.endpoint_targets, rv.accepted_publications,
	convert_from(v.document, 'UTF8') AS document, rv.recorded_at,
	EXISTS (SELECT 1 FROM configpub.revocation x WHERE x.publication_id = rv.publication_id) AS publication_revoked
FROM configpub.workflow_release_view rv
JOIN configpub.workflow_view v ON v.view_digest = rv.view_digest;

CREATE VIEW configpub_workflow.workflow_view_current AS
SELECT h.*
FROM configpub_workflow.workflow_view_history h
JOIN configpub.environment e ON e.env_tag = h.env_tag AND e.current_release_version = h.release_version;

REVOKE ALL ON ALL TABLES IN SCHEMA configpub FROM configpub_workflow_reader;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA configpub FROM configpub_workflow_reader;
REVOKE ALL ON SCHEMA configpub FROM configpub_workflow_reader;
GRANT USAGE ON SCHEMA configpub_workflow TO configpub_workflow_reader;
GRANT SELECT ON configpub_workflow.workflow_view_history, configpub_workflow.workflow_view_current
	TO configpub_workflow_reader;
-- The promoter and the viewer-facing status read the same views.
GRANT USAGE ON SCHEMA configpub_workflow TO configpub_promoter;
GRANT SELECT ON configpub_workflow.workflow_view_history, configpub_workflow.workflow_view_current
	TO configpub_promoter;
