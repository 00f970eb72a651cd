-- Version 30: the Workflow reader sees a calling Agent's revoked snapshot.
--
-- Workflow admission checks a calling Agent (its identity and the
-- publication and policy digest its runtime sends) against the views of
-- schema configpub_workflow. workflow_view_history says only whether the
-- publication a view was recorded under is revoked: a revocation of the
-- Agent's own snapshot (revoke --snapshot), or of a publication no view was
-- recorded under (a release that carried the Agent over), was invisible,
-- and such an Agent was admitted.
--
-- revoked_snapshot lists every snapshot revoked by its own id or by its
-- publication: identity (env_tag, host, service_id), snapshot, publication
-- and policy digest, how (snapshot or publication) and when. It holds no
-- reason, actor, bytes or anything of another table.
CREATE VIEW configpub_workflow.revoked_snapshot AS
SELECT s.env_tag, s.host, s.service_id, s.snapshot_id, s.publication_id, s.policy_digest,
	'snapshot'::text AS revoked_by, r.revoked_at
FROM configpub.revocation r
JOIN configpub.config_snapshot s ON s.snapshot_id = r.snapshot_id
UNION ALL
SELECT s.env_tag, s.host, s.service_id, s.snapshot_id, s.publication_id, s.policy_digest,
	'publication'::text, r.revoked_at
FROM configpub.revocation r
JOIN configpub.config_snapshot s ON s.publication_id = r.publication_id
WHERE r.publication_id IS NOT NULL;

GRANT SELECT ON configpub_workflow.revoked_snapshot TO configpub_workflow_reader;
