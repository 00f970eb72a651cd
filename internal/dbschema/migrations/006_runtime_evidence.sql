-- Version 6: runtime evidence that keeps apart what a runtime runs and what
-- it was told about.
--
-- * runtime_evidence gains the publication and release of the snapshot the
--   report is about, the delivery-manifest sequence, the snapshot the runtime
--   runs after the load (running_snapshot_id) and its last-known-good
--   (lkg_snapshot_id), the runtime's own observation time, and the kind of
--   record: an 'observation' (reported by the runtime with its workload
--   token, unverified) or a 'receipt' (read back by the control plane).
-- * Evidence rows are append-only: a report about an older release stays
--   attached to that snapshot and is never rewritten when the runtime later
--   runs another one.
-- * The reason is a stable code: no control characters.
ALTER TABLE configpub.runtime_evidence
	ADD COLUMN publication_id      uuid,
	ADD COLUMN release_version     bigint CHECK (release_version IS NULL OR release_version > 0),
	ADD COLUMN sequence            bigint CHECK (sequence IS NULL OR sequence > 0),
	ADD COLUMN running_snapshot_id uuid,
	ADD COLUMN lkg_snapshot_id     uuid,
	ADD COLUMN observed_at         timestamptz,
	ADD COLUMN kind                text NOT NULL DEFAULT 'observation' CHECK (kind IN ('observation', 'receipt')),
	ADD CONSTRAINT runtime_evidence_reason_printable CHECK (reason !~ '[[:cntrl:]]');

CREATE INDEX runtime_evidence_snapshot ON configpub.runtime_evidence (snapshot_id, evidence_id);

CREATE TRIGGER runtime_evidence_append_only BEFORE UPDATE OR DELETE ON configpub.runtime_evidence
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER runtime_evidence_no_truncate BEFORE TRUNCATE ON configpub.runtime_evidence
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();
