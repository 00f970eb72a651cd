-- Version 24: how long a release can be activated, or rolled back to.
--
-- A pointer may only be moved to a snapshot inside its activation window
-- (config_snapshot.valid_from / expires_at), so a release can be activated,
-- or returned to by a rollback, with every one of its targets only between
-- the latest valid_from and the earliest expires_at of the snapshots of its
-- mapping (those it created and those it kept from earlier releases). After
-- that a move to the release is refused for each target whose snapshot's
-- window ended (targets whose pointer is already at the snapshot do not
-- move and are not checked).
--
-- release_target_summary.activatable_from / activatable_until keep those two
-- times per release, computed with the other summary counts by the
-- statement trigger on config_release_target inserts (a mapping inserted in
-- several statements narrows them) and backfilled here. NULL: no snapshot
-- of the mapping has a known window (recorded before version 3).
ALTER TABLE configpub.release_target_summary
	ADD COLUMN activatable_from timestamptz,
	ADD COLUMN activatable_until timestamptz;

-- Version 18's function, with each new row's snapshot read once by its key
-- for both whether the release created it and its window (OFFSET 0 keeps
-- the lateral subquery a probe of config_snapshot_pkey per row: pulled up
-- into a join, right after a large recording without statistics, the
-- planner is free to scan every snapshot instead, as version 18 explains).
CREATE OR REPLACE FUNCTION configpub.summarize_release_targets() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	rel record;
BEGIN
	FOR rel IN SELECT DISTINCT n.env_tag, n.release_version, r.base_release_version
		FROM new_rows n
		JOIN configpub.config_release r ON r.env_tag = n.env_tag AND r.release_version = n.release_version
	LOOP
		INSERT INTO configpub.release_target_summary AS x
			(env_tag, release_version, targets, changed, kept, activatable_from, activatable_until)
		SELECT rel.env_tag, rel.release_version, count(*),
			count(*) FILTER (WHERE t.snapshot_release = rel.release_version
				AND (t.base_snapshot IS NULL OR t.base_snapshot <> t.snapshot_id)),
			count(t.base_snapshot),
			max(t.valid_from), min(t.expires_at)
		FROM (SELECT n.snapshot_id, s.release_version AS snapshot_release, s.valid_from, s.expires_at,
				(SELECT b.snapshot_id FROM configpub.config_release_target b
					WHERE b.env_tag = rel.env_tag AND b.release_version = rel.base_release_version
					  AND b.host = n.host AND b.service_id = n.service_id) AS base_snapshot
			FROM new_rows n
			LEFT JOIN LATERAL (SELECT s.release_version, s.valid_from, s.expires_at
				FROM configpub.config_snapshot s WHERE s.snapshot_id = n.snapshot_id OFFSET 0) s ON true
			WHERE n.env_tag = rel.env_tag AND n.release_version = rel.release_version) t
		ON CONFLICT (env_tag, release_version) DO UPDATE
			SET targets = x.targets + EXCLUDED.targets, changed = x.changed + EXCLUDED.changed, kept = x.kept + EXCLUDED.kept,
				activatable_from = greatest(x.activatable_from, EXCLUDED.activatable_from),
				activatable_until = least(x.activatable_until, EXCLUDED.activatable_until);
	END LOOP;
	RETURN NULL;
END
$$;

UPDATE configpub.release_target_summary x
SET activatable_from = w.activatable_from, activatable_until = w.activatable_until
FROM (SELECT t.env_tag, t.release_version, max(s.valid_from) AS activatable_from, min(s.expires_at) AS activatable_until
	FROM configpub.config_release_target t
	JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
	GROUP BY t.env_tag, t.release_version) w
WHERE x.env_tag = w.env_tag AND x.release_version = w.release_version;

-- status reads the window with the release rows.
GRANT SELECT ON configpub.release_target_summary TO configpub_promoter;
