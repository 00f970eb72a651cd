-- Version 11: what the operator console reads without recomputing it per
-- request, and the Workflow views it shows.
--
-- * release_target_summary: per release, how many targets its mapping has,
--   how many of them changed (the snapshot is one the release created and
--   differs from the base release's for that identity) and how many
--   identities it kept from its base (so the base's targets - kept is how
--   many it retired). A release's
--   target mapping is append-only, so the summary is computed once, by a
--   statement trigger on config_release_target inserts (added to when a
--   mapping is inserted in several statements), and backfilled here.
-- * configpub_workflow.workflow_view_summary: the metadata of every recorded
--   Workflow view (no view document, limits, agents or tools) with whether
--   its publication is revoked; configpub_viewer reads it (and nothing else
--   in schema configpub_workflow) to list a release's PINNABLE views.
CREATE TABLE configpub.release_target_summary (
	env_tag          text NOT NULL,
	release_version  bigint NOT NULL,
	targets          integer NOT NULL CHECK (targets >= 0),
	changed          integer NOT NULL CHECK (changed >= 0),
	kept             integer NOT NULL CHECK (kept >= 0),
	PRIMARY KEY (env_tag, release_version),
	FOREIGN KEY (env_tag, release_version) REFERENCES configpub.config_release (env_tag, release_version)
);

CREATE FUNCTION configpub.summarize_release_targets() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	INSERT INTO configpub.release_target_summary AS x (env_tag, release_version, targets, changed, kept)
	SELECT n.env_tag, n.release_version, count(*),
		count(*) FILTER (WHERE s.snapshot_id IS NOT NULL AND (b.snapshot_id IS NULL OR b.snapshot_id <> n.snapshot_id)),
		count(b.host)
	FROM new_rows n
	JOIN configpub.config_release r ON r.env_tag = n.env_tag AND r.release_version = n.release_version
	LEFT JOIN configpub.config_snapshot s ON s.snapshot_id = n.snapshot_id AND s.release_version = n.release_version
	LEFT JOIN configpub.config_release_target b ON b.env_tag = n.env_tag AND b.release_version = r.base_release_version
		AND b.host = n.host AND b.service_id = n.service_id
	GROUP BY n.env_tag, n.release_version
	ON CONFLICT (env_tag, release_version) DO UPDATE
		SET targets = x.targets + EXCLUDED.targets, changed = x.changed + EXCLUDED.changed, kept = x.kept + EXCLUDED.kept;
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION configpub.summarize_release_targets() FROM PUBLIC;

CREATE TRIGGER config_release_target_summary AFTER INSERT ON configpub.config_release_target
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.summarize_release_targets();

INSERT INTO configpub.release_target_summary (env_tag, release_version, targets, changed, kept)
SELECT r.env_tag, r.release_version,
	(SELECT count(*) FROM configpub.config_release_target n
		WHERE n.env_tag = r.env_tag AND n.release_version = r.release_version),
	(SELECT count(*) FROM configpub.config_release_target n
		JOIN configpub.config_snapshot s ON s.snapshot_id = n.snapshot_id AND s.release_version = n.release_version
		WHERE n.env_tag = r.env_tag AND n.release_version = r.release_version
			AND NOT EXISTS (SELECT 1 FROM configpub.config_release_target b WHERE b.env_tag = n.env_tag
				AND b.release_version = r.base_release_version AND b.host = n.host AND b.service_id = n.service_id
				AND b.snapshot_id = n.snapshot_id)),
	(SELECT count(*) FROM configpub.config_release_target n
		JOIN configpub.config_release_target b ON b.env_tag = n.env_tag AND b.release_version = r.base_release_version
			AND b.host = n.host AND b.service_id = n.service_id
		WHERE n.env_tag = r.env_tag AND n.release_version = r.release_version)
FROM configpub.config_release r
WHERE EXISTS (SELECT 1 FROM configpub.config_release_target t
	WHERE t.env_tag = r.env_tag AND t.release_version = r.release_version);

GRANT SELECT ON configpub.release_target_summary TO configpub_viewer;

CREATE VIEW configpub_workflow.workflow_view_summary AS
SELECT env_tag, release_version, workflow, wf_def_id, version, view_id, view_digest, definition_digest,
	publication_id, recorded_at, publication_revoked
FROM configpub_workflow.workflow_view_history;

GRANT USAGE ON SCHEMA configpub_workflow TO configpub_viewer;
GRANT SELECT ON configpub_workflow.workflow_view_summary TO configpub_viewer;
