-- Knowledge control replicas, version 2: the lease of the applied snapshot.
--
-- The runtime client fails closed once the signed lease of its snapshot
-- ends; the materialized replicas did not: a loader that stopped (or a
-- control plane that stopped renewing, or revoked the snapshot) left them
-- readable for good. applied_snapshot.lease_expires_at is the end of the
-- signed lease of the last delivery manifest applied for the snapshot, set
-- by every apply and moved forward by every lease renewal the loader
-- applies (the replicas themselves are not rewritten). live_replica is the
-- replicas whose identity's lease has not ended: the readers' fail-closed
-- view. A pointer applied before this version has no lease recorded (NULL)
-- and stays visible until its next renewal records one.
ALTER TABLE configpub_knowledge.applied_snapshot ADD COLUMN lease_expires_at timestamptz;

CREATE VIEW configpub_knowledge.live_replica AS
	SELECT r.host, r.service_id, r.env_tag, r.kind, r.item_id, r.digest, r.content, r.release_version, r.snapshot_id,
		a.lease_expires_at
	FROM configpub_knowledge.replica r
	JOIN configpub_knowledge.applied_snapshot a
		ON a.host = r.host AND a.service_id = r.service_id AND a.env_tag = r.env_tag
	WHERE a.lease_expires_at IS NULL OR a.lease_expires_at > now();

GRANT SELECT ON configpub_knowledge.live_replica TO configpub_knowledge_loader, configpub_knowledge_reader;
