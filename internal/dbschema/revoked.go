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

// RevocationsSQL lists the revocations of environment $1, newest first, at
// most $2 (NULL: all): revocation id, snapshot id and publication id (” when
// not that kind), reason, actor, time, command id (”), the revoked
// snapshot's host and service id (”), the release that created what was
// revoked (0 when unknown), how many snapshots the revocation covers and
// how many of the environment's current pointers are at one of them now.
// A revocation names no environment: a snapshot's is its own, a
// publication's that of the snapshots it created or, for a release that
// created none, that of the Workflow views recorded under it (looked up
// only for a publication no snapshot carries). It reads the views through
// configpub_workflow.workflow_view_history (configpub_promoter);
// ViewerRevocationsSQL is the same for configpub_viewer.
const RevocationsSQL = revocationsHead + workflowRevocations + "configpub_workflow.workflow_view_history" + workflowRevocationsTail + revocationsTail

// ViewerRevocationsSQL is RevocationsSQL reading the Workflow views through
// configpub_workflow.workflow_view_summary, the one configpub_viewer reads.
const ViewerRevocationsSQL = revocationsHead + workflowRevocations + "configpub_workflow.workflow_view_summary" + workflowRevocationsTail + revocationsTail

// SnapshotRevocationsSQL is RevocationsSQL for a schema whose Workflow views
// the reader cannot read (before version 11, for configpub_viewer): a
// publication's environment is only that of its snapshots.
const SnapshotRevocationsSQL = revocationsHead + "\n\tCROSS JOIN (SELECT NULL::bigint AS release_version) pw" + revocationsTail

const revocationsHead = `SELECT v.revocation_id, coalesce(v.snapshot_id::text, ''),
		CASE WHEN v.snapshot_id IS NULL THEN v.publication_id::text ELSE '' END,
		v.reason, v.actor, v.revoked_at, coalesce(v.command_id::text, ''),
		coalesce(s.host, ''), coalesce(s.service_id, ''), coalesce(s.release_version, ps.release_version, pw.release_version, 0),
		CASE WHEN s.snapshot_id IS NOT NULL THEN 1
			ELSE (SELECT count(*) FROM configpub.config_snapshot x WHERE x.publication_id = v.publication_id AND x.env_tag = $1) END,
		CASE WHEN s.snapshot_id IS NOT NULL THEN
				(SELECT count(*) FROM configpub.current_pointer p WHERE p.env_tag = $1 AND p.host = s.host
					AND p.service_id = s.service_id AND p.snapshot_id = s.snapshot_id)
			ELSE (SELECT count(*) FROM configpub.current_pointer p JOIN configpub.config_snapshot x ON x.snapshot_id = p.snapshot_id
				WHERE p.env_tag = $1 AND x.publication_id = v.publication_id) END
	FROM configpub.revocation v
	LEFT JOIN configpub.config_snapshot s ON s.snapshot_id = v.snapshot_id AND s.env_tag = $1
	LEFT JOIN LATERAL (SELECT x.release_version FROM configpub.config_snapshot x
		WHERE v.snapshot_id IS NULL AND x.publication_id = v.publication_id AND x.env_tag = $1 LIMIT 1) ps ON true
`

const workflowRevocations = `
	LEFT JOIN LATERAL (SELECT w.release_version FROM `

const workflowRevocationsTail = ` w
		WHERE v.snapshot_id IS NULL AND w.env_tag = $1 AND w.publication_id = v.publication_id
		  AND NOT EXISTS (SELECT 1 FROM configpub.config_snapshot y WHERE y.publication_id = v.publication_id)
		LIMIT 1) pw ON true`

const revocationsTail = `
	WHERE s.snapshot_id IS NOT NULL OR ps.release_version IS NOT NULL OR pw.release_version IS NOT NULL
	ORDER BY v.revoked_at DESC, v.revocation_id DESC
	LIMIT $2`
