-- Version 18: the release summary trigger probes each new target's base row
-- by its whole primary key.
--
-- Version 11's trigger joined the base release's rows on
-- r.base_release_version, a column of a joined table. Right after a large
-- release is recorded (its rows and snapshots inserted in the same
-- transaction, statistics not yet gathered) the planner took release_version
-- out of the index condition and scanned every release of an identity per
-- new row: recording 10,000 targets spent 6 s in this trigger, 100,000 did
-- not finish in 13 minutes. The trigger now works one release at a time (an
-- INSERT statement records one release), and reads each new row's base row
-- and snapshot by subqueries on their whole keys: one probe of
-- config_release_target_pkey and of config_snapshot_pkey per row, whatever
-- the statistics say (a join left the planner free to probe by a prefix).
-- Same counts.
CREATE OR REPLACE FUNCTION configpub.summarize_release_targets() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
	rel record;
BEGIN
	FOR rel IN SELECT DISTINCT n.env_tag, n.release_version, r.base_release_version
		FROM new_rows n
		JOIN configpub.config_release r ON r.env_tag = n.env_tag AND r.release_version = n.release_version
	LOOP
		INSERT INTO configpub.release_target_summary AS x (env_tag, release_version, targets, changed, kept)
		SELECT rel.env_tag, rel.release_version, count(*),
			count(*) FILTER (WHERE t.fresh AND (t.base_snapshot IS NULL OR t.base_snapshot <> t.snapshot_id)),
			count(t.base_snapshot)
		FROM (SELECT n.snapshot_id,
				EXISTS (SELECT 1 FROM configpub.config_snapshot s
					WHERE s.snapshot_id = n.snapshot_id AND s.release_version = n.release_version) AS fresh,
				(SELECT b.snapshot_id FROM configpub.config_release_target b
					WHERE b.env_tag = rel.env_tag AND b.release_version = rel.base_release_version
					  AND b.host = n.host AND b.service_id = n.service_id) AS base_snapshot
			FROM new_rows n
			WHERE n.env_tag = rel.env_tag AND n.release_version = rel.release_version) t
		ON CONFLICT (env_tag, release_version) DO UPDATE
			SET targets = x.targets + EXCLUDED.targets, changed = x.changed + EXCLUDED.changed, kept = x.kept + EXCLUDED.kept;
	END LOOP;
	RETURN NULL;
END
$$;
