-- Version 14: "what did the environment look like at T" without reading
-- every pointer move before T.
--
-- An activation or rollback moves every pointer of the environment to the
-- release's target mapping and retires the identities the mapping does not
-- contain, in one transaction, so the environment right after it is that
-- mapping; only moves after it have to be read.
--
-- * release_target_release_count: per release mapping, how many of its
--   targets are served a snapshot of each release (the "targets by release"
--   of the time-travel page). The mapping is append-only, so a statement
--   trigger on config_release_target inserts adds to it (a mapping inserted
--   in several statements adds up), and it is backfilled here.
-- * pointer_move_env_moved: an environment's moves by time, so the moves
--   between an activation and T are read from the index.
CREATE TABLE configpub.release_target_release_count (
	env_tag           text NOT NULL,
	release_version   bigint NOT NULL,
	snapshot_release  bigint NOT NULL,
	targets           integer NOT NULL CHECK (targets >= 0),
	PRIMARY KEY (env_tag, release_version, snapshot_release),
	FOREIGN KEY (env_tag, release_version) REFERENCES configpub.config_release (env_tag, release_version)
);

CREATE FUNCTION configpub.count_release_target_releases() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
	INSERT INTO configpub.release_target_release_count AS x (env_tag, release_version, snapshot_release, targets)
	SELECT n.env_tag, n.release_version, s.release_version, count(*)
	FROM new_rows n JOIN configpub.config_snapshot s ON s.snapshot_id = n.snapshot_id
	GROUP BY 1, 2, 3
	ON CONFLICT (env_tag, release_version, snapshot_release) DO UPDATE SET targets = x.targets + EXCLUDED.targets;
	RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION configpub.count_release_target_releases() FROM PUBLIC;

CREATE TRIGGER config_release_target_release_count AFTER INSERT ON configpub.config_release_target
	REFERENCING NEW TABLE AS new_rows
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.count_release_target_releases();

INSERT INTO configpub.release_target_release_count (env_tag, release_version, snapshot_release, targets)
SELECT t.env_tag, t.release_version, s.release_version, count(*)
FROM configpub.config_release_target t JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
GROUP BY 1, 2, 3;

CREATE INDEX pointer_move_env_moved ON configpub.pointer_move (env_tag, moved_at);

GRANT SELECT ON configpub.release_target_release_count TO configpub_viewer;
