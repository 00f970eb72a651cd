-- Version 19: collecting the artifacts no snapshot references.
--
-- A large release stores its artifacts ahead of the recording that
-- references them, batch by batch. A promotion that stops in between, or
-- loses its compare-and-swap and is never retried, leaves artifact rows no
-- snapshot references: never served, but holding their bytes for ever.
-- configpub.collect_artifacts deletes such rows stored before a cutoff, a
-- bounded batch per call, and keeps a record of each in
-- configpub.collected_artifact. It is the only way an artifact row is ever
-- deleted: no role holds DELETE on configpub.artifact, and its append-only
-- trigger lets a DELETE through only while the function runs.
--
-- A referenced row cannot be collected: the foreign key from
-- config_snapshot refuses its deletion (a recording that commits while a
-- collection runs makes that collection fail, never the snapshot lose its
-- bytes), and a recording that references a row being collected waits for
-- the collection and then fails its foreign key check, cleanly: the next
-- attempt stores the artifact again. The index makes both the search and
-- the foreign key's check one probe per artifact instead of a scan of every
-- snapshot.
CREATE INDEX config_snapshot_artifact ON configpub.config_snapshot (artifact_digest);

CREATE TABLE configpub.collected_artifact (
	artifact_digest  text NOT NULL,
	media_type       text NOT NULL,
	size             bigint NOT NULL,
	stored_at        timestamptz NOT NULL,
	collected_at     timestamptz NOT NULL DEFAULT now(),
	collected_by     text NOT NULL DEFAULT session_user
);
CREATE INDEX collected_artifact_digest ON configpub.collected_artifact (artifact_digest);
CREATE TRIGGER collected_artifact_append_only BEFORE UPDATE OR DELETE ON configpub.collected_artifact
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER collected_artifact_no_truncate BEFORE TRUNCATE ON configpub.collected_artifact
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

CREATE FUNCTION configpub.refuse_artifact_mutation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' AND current_setting('configpub.collecting_artifacts', true) = 'on' THEN
		RETURN OLD;
	END IF;
	RAISE EXCEPTION 'configpub.% is append-only: % refused', TG_TABLE_NAME, TG_OP
		USING ERRCODE = 'CP001';
END
$$;
DROP TRIGGER artifact_append_only ON configpub.artifact;
CREATE TRIGGER artifact_append_only BEFORE UPDATE OR DELETE ON configpub.artifact
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_artifact_mutation();

CREATE FUNCTION configpub.collect_artifacts(stored_before timestamptz, max_rows integer)
RETURNS TABLE (artifact_digest text, size bigint, stored_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
	IF stored_before IS NULL OR max_rows IS NULL OR max_rows < 1 THEN
		RAISE EXCEPTION 'configpub.collect_artifacts: want a cutoff time and a positive number of rows'
			USING ERRCODE = '22023';
	END IF;
	PERFORM set_config('configpub.collecting_artifacts', 'on', true);
	RETURN QUERY
	WITH gone AS (
		DELETE FROM configpub.artifact a
		WHERE a.artifact_digest IN (
			SELECT x.artifact_digest FROM configpub.artifact x
			WHERE x.created_at < stored_before
			  AND NOT EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.artifact_digest = x.artifact_digest)
			ORDER BY x.created_at, x.artifact_digest
			LIMIT max_rows
			FOR UPDATE OF x SKIP LOCKED)
		RETURNING a.artifact_digest, a.media_type, a.size, a.created_at)
	INSERT INTO configpub.collected_artifact AS c (artifact_digest, media_type, size, stored_at)
	SELECT g.artifact_digest, g.media_type, g.size, g.created_at FROM gone g
	RETURNING c.artifact_digest, c.size, c.stored_at;
	PERFORM set_config('configpub.collecting_artifacts', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION configpub.collect_artifacts(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION configpub.collect_artifacts(timestamptz, integer) TO configpub_promoter;

GRANT SELECT ON configpub.collected_artifact TO configpub_promoter;
GRANT SELECT (artifact_digest, media_type, size, stored_at, collected_at, collected_by)
	ON configpub.collected_artifact TO configpub_viewer;
