-- Version 4: the read-only operator console.
--
-- * configpub_viewer reads release, journal, target mapping, pointer,
--   pointer-move, revocation, evidence and snapshot metadata, and the
--   metadata columns of artifact (digest, media type, size) -- never the
--   bytes, never the idempotency ledger.
-- * configpub_viewer_bytes adds SELECT on artifact bytes. A console login is
--   made a member of it only where operators may see configuration values
--   (the console's --show-values flag also has to be set).
-- * config_snapshot (env_tag, release_version): the snapshots a release
--   created, read by the console's timeline.
-- * Every release-journal insert NOTIFYs configpub_console with the
--   environment, so the console updates live when a release is recorded,
--   staged or changes state without a pointer move.
DO $$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['configpub_viewer', 'configpub_viewer_bytes'] LOOP
		BEGIN
			EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r);
		EXCEPTION WHEN duplicate_object OR unique_violation THEN
			NULL;
		END;
	END LOOP;
END
$$;

GRANT USAGE ON SCHEMA configpub TO configpub_viewer, configpub_viewer_bytes;
GRANT SELECT ON configpub.environment, configpub.config_release, configpub.config_release_journal,
	configpub.config_release_target, configpub.config_snapshot, configpub.current_pointer,
	configpub.pointer_move, configpub.revocation, configpub.runtime_evidence, configpub.schema_migration
	TO configpub_viewer;
GRANT SELECT (artifact_digest, media_type, size, created_at) ON configpub.artifact TO configpub_viewer;
GRANT SELECT (artifact_digest, bytes) ON configpub.artifact TO configpub_viewer_bytes;

CREATE INDEX config_snapshot_release ON configpub.config_snapshot (env_tag, release_version);

CREATE FUNCTION configpub.notify_console() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
	e text;
BEGIN
	FOR e IN SELECT DISTINCT env_tag FROM new_rows LOOP
		PERFORM pg_notify('configpub_console', json_build_object('envTag', e)::text);
	END LOOP;
	RETURN NULL;
END
$$;
CREATE TRIGGER config_release_journal_notify AFTER INSERT ON configpub.config_release_journal
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.notify_console();
