-- Version 8: receipts read back by the control plane.
--
-- * A receipt (kind 'receipt') is written by the control plane after it read
--   a runtime's status endpoint with its own credential. It names the phase
--   it is about ('current' configuration or a 'candidate' of a staged
--   release), the runtime's result (APPLIED, READY for a verified candidate,
--   REJECTED), the runtime's load time (loaded_at, its clock) and the status
--   endpoint it was read from.
-- * The Config Server, which answers workload tokens, can no longer choose
--   the kind, the phase or the new columns: its INSERT privilege is narrowed
--   to the columns of an observation, so whatever a workload reports is
--   stored as kind 'observation', phase 'current' (the defaults).
ALTER TABLE configpub.runtime_evidence
	ADD COLUMN phase     text NOT NULL DEFAULT 'current' CHECK (phase IN ('current', 'candidate')),
	ADD COLUMN loaded_at timestamptz,
	ADD COLUMN endpoint  text NOT NULL DEFAULT '' CHECK (endpoint !~ '[[:cntrl:]]' AND length(endpoint) <= 2048),
	DROP CONSTRAINT runtime_evidence_outcome_check,
	ADD CONSTRAINT runtime_evidence_outcome_check CHECK (outcome IN ('APPLIED', 'REJECTED', 'READY')),
	-- READY and the candidate phase exist only in receipts; a receipt is
	-- always about a snapshot.
	ADD CONSTRAINT runtime_evidence_ready_receipt CHECK (outcome <> 'READY' OR (kind = 'receipt' AND phase = 'candidate')),
	ADD CONSTRAINT runtime_evidence_candidate_receipt CHECK (phase = 'current' OR kind = 'receipt'),
	ADD CONSTRAINT runtime_evidence_receipt_snapshot CHECK (kind <> 'receipt' OR snapshot_id IS NOT NULL);

CREATE INDEX runtime_evidence_receipt ON configpub.runtime_evidence (env_tag, host, service_id, evidence_id)
	WHERE kind = 'receipt';

REVOKE INSERT ON configpub.runtime_evidence FROM configpub_server;
GRANT INSERT (host, service_id, env_tag, snapshot_id, outcome, reason, artifact_digest, content_digest, policy_digest,
	detail, publication_id, release_version, sequence, running_snapshot_id, lkg_snapshot_id, observed_at, reported_at)
	ON configpub.runtime_evidence TO configpub_server;
