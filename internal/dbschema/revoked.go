package dbschema

// RevokedReleasesSQL selects, of environment $1's releases $2 (bigint[]),
// those that can never be activated again because their target mapping
// holds a revoked snapshot, or a snapshot of a revoked publication. It
// costs a few index probes per revocation and release: a revoked snapshot
// is looked up by its identity in each release's mapping, and a revoked
// publication (one per compiled release) by the release that created it
// in each mapping's count of targets by snapshot release.
const RevokedReleasesSQL = `SELECT r.v FROM unnest($2::bigint[]) AS r(v)
	WHERE EXISTS (SELECT 1 FROM configpub.revocation rv
			JOIN configpub.config_snapshot s ON s.snapshot_id = rv.snapshot_id AND s.env_tag = $1
			JOIN configpub.config_release_target t ON t.env_tag = $1 AND t.release_version = r.v
				AND t.host = s.host AND t.service_id = s.service_id AND t.snapshot_id = s.snapshot_id)
		OR EXISTS (SELECT 1 FROM configpub.revocation rv
			JOIN configpub.release_target_release_count c ON c.env_tag = $1 AND c.release_version = r.v AND c.targets > 0
				AND c.snapshot_release = (SELECT s.release_version FROM configpub.config_snapshot s
					WHERE s.publication_id = rv.publication_id AND s.env_tag = $1 LIMIT 1)
			WHERE rv.publication_id IS NOT NULL)`
