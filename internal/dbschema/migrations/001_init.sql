-- configpub schema, version 1 (DESIGN §6). Applied by dbschema.Migrate inside
-- one transaction; schema configpub and the ledger already exist.

-- Group roles are cluster-wide: guard against another database of the same
-- cluster creating them concurrently.
DO $$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['configpub_promoter', 'configpub_server', 'configpub_workflow_reader'] LOOP
		BEGIN
			EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r);
		EXCEPTION WHEN duplicate_object OR unique_violation THEN
			NULL;
		END;
	END LOOP;
END
$$;

-- Append-only guard: refuses UPDATE, DELETE and TRUNCATE for every role.
CREATE FUNCTION configpub.refuse_mutation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'configpub.% is append-only: % refused', TG_TABLE_NAME, TG_OP
		USING ERRCODE = 'CP001';
END
$$;

CREATE TABLE configpub.environment (
	env_tag                  text PRIMARY KEY CHECK (env_tag <> ''),
	current_release_version  bigint CHECK (current_release_version > 0),
	pending_release_version  bigint CHECK (pending_release_version > 0),
	pending_command_id       uuid,
	row_revision             bigint NOT NULL DEFAULT 1 CHECK (row_revision > 0),
	updated_at               timestamptz NOT NULL
);

CREATE TABLE configpub.artifact (
	artifact_digest  text PRIMARY KEY CHECK (artifact_digest = 'sha256:' || encode(sha256(bytes), 'hex')),
	media_type       text NOT NULL,
	bytes            bytea NOT NULL,
	size             bigint NOT NULL CHECK (size = octet_length(bytes)),
	created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE configpub.config_snapshot (
	snapshot_id               uuid PRIMARY KEY,
	host                      text NOT NULL CHECK (host <> ''),
	service_id                text NOT NULL CHECK (service_id <> ''),
	env_tag                   text NOT NULL CHECK (env_tag <> ''),
	audience                  text NOT NULL CHECK (audience IN ('agent', 'gateway', 'knowledge')),
	subject_kind              text NOT NULL DEFAULT '',
	subject_name              text NOT NULL DEFAULT '',
	publication_id            uuid NOT NULL,
	policy_snapshot_id        uuid NOT NULL,
	policy_version            bigint NOT NULL,
	release_version           bigint NOT NULL CHECK (release_version > 0),
	artifact_digest           text NOT NULL REFERENCES configpub.artifact (artifact_digest),
	content_digest            text NOT NULL CHECK (content_digest ~ '^sha256:[0-9a-f]{64}$'),
	policy_digest             text NOT NULL CHECK (policy_digest ~ '^sha256:[0-9a-f]{64}$'),
	property_set_digest       text NOT NULL CHECK (property_set_digest ~ '^sha256:[0-9a-f]{64}$'),
	schema_version            integer NOT NULL,
	compatibility_generation  bigint NOT NULL DEFAULT 0,
	revocation_epoch          bigint NOT NULL DEFAULT 0,
	source_event_sequence     bigint NOT NULL DEFAULT 0,
	lease_profile             text NOT NULL DEFAULT '',
	input_digests             jsonb NOT NULL DEFAULT '{}',
	validation_state          text NOT NULL DEFAULT 'VALID',
	oci_reference             text NOT NULL DEFAULT '',
	oci_manifest_digest       text NOT NULL DEFAULT '',
	oci_signature             text NOT NULL DEFAULT '',
	created_at                timestamptz NOT NULL,
	UNIQUE (snapshot_id, host, service_id, env_tag)
);
CREATE INDEX config_snapshot_identity ON configpub.config_snapshot (env_tag, host, service_id);
CREATE INDEX config_snapshot_publication ON configpub.config_snapshot (publication_id);

CREATE TABLE configpub.config_release (
	env_tag               text NOT NULL CHECK (env_tag <> ''),
	release_version       bigint NOT NULL CHECK (release_version > 0),
	base_release_version  bigint NOT NULL DEFAULT 0 CHECK (base_release_version >= 0 AND base_release_version < release_version),
	row_revision          bigint NOT NULL CHECK (row_revision > 0),
	lifecycle_state       text NOT NULL CHECK (lifecycle_state IN ('RECORDED', 'ACTIVE', 'SUPERSEDED', 'ROLLED_BACK')),
	execution_outcome     text NOT NULL CHECK (execution_outcome IN ('NOT_REQUESTED', 'UNCONFIRMED', 'APPLIED', 'NOT_APPLIED', 'INTEGRITY_ERROR')),
	definition            bytea NOT NULL,
	definition_hash       text NOT NULL CHECK (definition_hash = 'sha256:' || encode(sha256(definition), 'hex')),
	release_digest        text NOT NULL DEFAULT '',
	source_commit         text NOT NULL DEFAULT '',
	source_ref            text NOT NULL DEFAULT '',
	actor                 text NOT NULL,
	reviewers             text[] NOT NULL DEFAULT '{}',
	reason                text NOT NULL DEFAULT '',
	target_count          integer NOT NULL CHECK (target_count >= 0),
	command_id            uuid NOT NULL,
	last_command_id       uuid NOT NULL,
	created_at            timestamptz NOT NULL,
	updated_at            timestamptz NOT NULL,
	PRIMARY KEY (env_tag, release_version)
);

-- config_release may only change by compare-and-swap: row_revision grows by
-- exactly one per update and the definition and provenance never change.
CREATE FUNCTION configpub.guard_release_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.row_revision <> OLD.row_revision + 1 THEN
		RAISE EXCEPTION 'configpub.config_release %/%: row_revision % -> % is not +1',
			OLD.env_tag, OLD.release_version, OLD.row_revision, NEW.row_revision USING ERRCODE = 'CP002';
	END IF;
	IF (NEW.env_tag, NEW.release_version, NEW.base_release_version, NEW.definition, NEW.definition_hash,
	    NEW.release_digest, NEW.source_commit, NEW.source_ref, NEW.actor, NEW.reviewers, NEW.reason,
	    NEW.target_count, NEW.command_id, NEW.created_at)
	   IS DISTINCT FROM
	   (OLD.env_tag, OLD.release_version, OLD.base_release_version, OLD.definition, OLD.definition_hash,
	    OLD.release_digest, OLD.source_commit, OLD.source_ref, OLD.actor, OLD.reviewers, OLD.reason,
	    OLD.target_count, OLD.command_id, OLD.created_at) THEN
		RAISE EXCEPTION 'configpub.config_release %/%: definition and provenance are immutable',
			OLD.env_tag, OLD.release_version USING ERRCODE = 'CP002';
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER config_release_cas BEFORE UPDATE ON configpub.config_release
	FOR EACH ROW EXECUTE FUNCTION configpub.guard_release_update();
CREATE TRIGGER config_release_no_delete BEFORE DELETE ON configpub.config_release
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER config_release_no_truncate BEFORE TRUNCATE ON configpub.config_release
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

-- One row per release mutation; sequence is the resulting row_revision.
CREATE TABLE configpub.config_release_journal (
	event_id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	env_tag          text NOT NULL,
	release_version  bigint NOT NULL,
	sequence         bigint NOT NULL CHECK (sequence > 0),
	command_id       uuid NOT NULL,
	command_hash     text NOT NULL,
	event_kind       text NOT NULL,
	from_state       text,
	to_state         text NOT NULL,
	from_outcome     text,
	to_outcome       text NOT NULL,
	actor            text NOT NULL,
	reason           text NOT NULL DEFAULT '',
	recorded_at      timestamptz NOT NULL,
	evidence         jsonb NOT NULL DEFAULT '{}',
	FOREIGN KEY (env_tag, release_version) REFERENCES configpub.config_release (env_tag, release_version),
	UNIQUE (env_tag, release_version, sequence)
);
CREATE INDEX config_release_journal_command ON configpub.config_release_journal (command_id);

CREATE FUNCTION configpub.guard_journal_sequence() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	rev bigint;
BEGIN
	SELECT row_revision INTO rev FROM configpub.config_release
		WHERE env_tag = NEW.env_tag AND release_version = NEW.release_version;
	IF rev IS DISTINCT FROM NEW.sequence THEN
		RAISE EXCEPTION 'configpub.config_release_journal %/%: sequence % is not the release revision %',
			NEW.env_tag, NEW.release_version, NEW.sequence, rev USING ERRCODE = 'CP002';
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER config_release_journal_sequence BEFORE INSERT ON configpub.config_release_journal
	FOR EACH ROW EXECUTE FUNCTION configpub.guard_journal_sequence();

-- The snapshot of every target of a release (unchanged targets keep the base
-- release's snapshot) and the delivery lease its profile gives.
CREATE TABLE configpub.config_release_target (
	env_tag           text NOT NULL,
	release_version   bigint NOT NULL,
	host              text NOT NULL,
	service_id        text NOT NULL,
	snapshot_id       uuid NOT NULL,
	changed           boolean NOT NULL,
	lease_profile     text NOT NULL DEFAULT '',
	refresh_after_ms  bigint NOT NULL CHECK (refresh_after_ms > 0),
	expires_after_ms  bigint NOT NULL CHECK (expires_after_ms >= refresh_after_ms),
	PRIMARY KEY (env_tag, release_version, host, service_id),
	FOREIGN KEY (env_tag, release_version) REFERENCES configpub.config_release (env_tag, release_version),
	FOREIGN KEY (snapshot_id, host, service_id, env_tag)
		REFERENCES configpub.config_snapshot (snapshot_id, host, service_id, env_tag)
);

-- Idempotency ledger: one row per command UUID.
CREATE TABLE configpub.command (
	command_id       uuid PRIMARY KEY,
	command_hash     text NOT NULL,
	action           text NOT NULL,
	env_tag          text NOT NULL,
	release_version  bigint,
	outcome          text NOT NULL CHECK (outcome IN ('UNCONFIRMED', 'APPLIED', 'NOT_APPLIED', 'INTEGRITY_ERROR')),
	result           jsonb,
	actor            text NOT NULL,
	created_at       timestamptz NOT NULL,
	settled_at       timestamptz
);

CREATE TABLE configpub.current_pointer (
	host                 text NOT NULL,
	service_id           text NOT NULL,
	env_tag              text NOT NULL,
	snapshot_id          uuid NOT NULL,
	release_version      bigint NOT NULL,
	sequence             bigint NOT NULL CHECK (sequence > 0),
	manifest             bytea NOT NULL,
	manifest_signature   text NOT NULL,
	manifest_key_id      text NOT NULL,
	lease_valid_from     timestamptz NOT NULL,
	lease_refresh_after  timestamptz NOT NULL,
	lease_expires_at     timestamptz NOT NULL,
	-- The rolling window the pointer's release gave it (renewals reuse it).
	lease_refresh_after_ms  bigint NOT NULL DEFAULT 0,
	lease_expires_after_ms  bigint NOT NULL DEFAULT 0,
	moved_at             timestamptz NOT NULL,
	updated_at           timestamptz NOT NULL,
	PRIMARY KEY (host, service_id, env_tag),
	FOREIGN KEY (snapshot_id, host, service_id, env_tag)
		REFERENCES configpub.config_snapshot (snapshot_id, host, service_id, env_tag)
);
CREATE INDEX current_pointer_env ON configpub.current_pointer (env_tag);

CREATE TABLE configpub.pointer_move (
	move_id                   bigserial PRIMARY KEY,
	host                      text NOT NULL,
	service_id                text NOT NULL,
	env_tag                   text NOT NULL,
	previous_snapshot_id      uuid,
	next_snapshot_id          uuid NOT NULL,
	publication_id            uuid NOT NULL,
	release_version           bigint NOT NULL,
	previous_release_version  bigint,
	sequence                  bigint NOT NULL,
	action                    text NOT NULL CHECK (action IN ('promote', 'activate', 'rollback')),
	actor                     text NOT NULL,
	reviewers                 text[] NOT NULL DEFAULT '{}',
	reason                    text NOT NULL DEFAULT '',
	command_id                uuid NOT NULL,
	moved_at                  timestamptz NOT NULL,
	FOREIGN KEY (next_snapshot_id, host, service_id, env_tag)
		REFERENCES configpub.config_snapshot (snapshot_id, host, service_id, env_tag)
);
CREATE INDEX pointer_move_identity ON configpub.pointer_move (env_tag, host, service_id, move_id);
CREATE INDEX pointer_move_command ON configpub.pointer_move (command_id);

CREATE TABLE configpub.delivery_manifest (
	host         text NOT NULL,
	service_id   text NOT NULL,
	env_tag      text NOT NULL,
	sequence     bigint NOT NULL CHECK (sequence > 0),
	issued_at    timestamptz NOT NULL,
	snapshot_id  uuid NOT NULL,
	manifest     bytea NOT NULL,
	signature    text NOT NULL,
	key_id       text NOT NULL,
	expires_at   timestamptz NOT NULL,
	kind         text NOT NULL DEFAULT 'move' CHECK (kind IN ('move', 'renew')),
	command_id   uuid,
	PRIMARY KEY (host, service_id, env_tag, sequence, issued_at),
	FOREIGN KEY (snapshot_id, host, service_id, env_tag)
		REFERENCES configpub.config_snapshot (snapshot_id, host, service_id, env_tag)
);

CREATE TABLE configpub.revocation (
	revocation_id   bigserial PRIMARY KEY,
	snapshot_id     uuid REFERENCES configpub.config_snapshot (snapshot_id),
	publication_id  uuid,
	reason          text NOT NULL CHECK (reason <> ''),
	actor           text NOT NULL,
	revoked_at      timestamptz NOT NULL,
	command_id      uuid,
	CHECK (snapshot_id IS NOT NULL OR publication_id IS NOT NULL)
);
CREATE INDEX revocation_snapshot ON configpub.revocation (snapshot_id);
CREATE INDEX revocation_publication ON configpub.revocation (publication_id);

CREATE TABLE configpub.runtime_evidence (
	evidence_id      bigserial PRIMARY KEY,
	host             text NOT NULL,
	service_id       text NOT NULL,
	env_tag          text NOT NULL,
	snapshot_id      uuid,
	outcome          text NOT NULL CHECK (outcome IN ('APPLIED', 'REJECTED')),
	reason           text NOT NULL DEFAULT '',
	artifact_digest  text NOT NULL DEFAULT '',
	content_digest   text NOT NULL DEFAULT '',
	policy_digest    text NOT NULL DEFAULT '',
	detail           jsonb NOT NULL DEFAULT '{}',
	reported_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runtime_evidence_identity ON configpub.runtime_evidence (env_tag, host, service_id, evidence_id);

-- Append-only tables.
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['artifact', 'config_snapshot', 'config_release_target', 'config_release_journal',
	                         'pointer_move', 'delivery_manifest', 'revocation'] LOOP
		EXECUTE format('CREATE TRIGGER %I BEFORE UPDATE OR DELETE ON configpub.%I FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation()', t || '_append_only', t);
		EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON configpub.%I FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation()', t || '_no_truncate', t);
	END LOOP;
END
$$;

-- Least privilege.
REVOKE ALL ON SCHEMA configpub FROM PUBLIC;
GRANT USAGE ON SCHEMA configpub TO configpub_promoter, configpub_server, configpub_workflow_reader;

GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA configpub TO configpub_promoter;
GRANT UPDATE ON configpub.environment, configpub.config_release, configpub.command, configpub.current_pointer
	TO configpub_promoter;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA configpub TO configpub_promoter;
REVOKE INSERT ON configpub.schema_migration FROM configpub_promoter;

GRANT SELECT ON configpub.artifact, configpub.config_snapshot, configpub.current_pointer,
	configpub.delivery_manifest, configpub.revocation TO configpub_server;
GRANT INSERT ON configpub.runtime_evidence TO configpub_server;
GRANT USAGE ON SEQUENCE configpub.runtime_evidence_evidence_id_seq TO configpub_server;

GRANT SELECT ON configpub.environment, configpub.config_release, configpub.config_release_journal,
	configpub.config_release_target, configpub.current_pointer, configpub.pointer_move,
	configpub.revocation, configpub.runtime_evidence, configpub.schema_migration TO configpub_workflow_reader;
GRANT SELECT (snapshot_id, host, service_id, env_tag, audience, subject_kind, subject_name, publication_id,
	policy_snapshot_id, policy_version, release_version, artifact_digest, content_digest, policy_digest,
	property_set_digest, schema_version, compatibility_generation, revocation_epoch, source_event_sequence,
	lease_profile, validation_state, created_at) ON configpub.config_snapshot TO configpub_workflow_reader;
