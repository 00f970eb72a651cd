-- Version 15: signed candidate delivery manifests.
--
-- A staged release's candidate snapshot is served (configPhase=candidate)
-- with a delivery manifest of its own, signed when the release is staged
-- and marked "phase": "candidate" inside the signed bytes, so that a
-- runtime prefetching it verifies it fully and a runtime loading its current
-- configuration refuses it. The manifest lives with its candidate pointer,
-- never in delivery_manifest (the history of current-phase manifests served
-- for historical snapshots), and is removed with it.
--
-- * sequence: above the identity's current pointer's sequence when signed.
-- * activated_at: the staging time (kept by renewals).
-- * issued_at, lease_refresh_after, lease_expires_at: the candidate lease;
--   a two-phase activation renews it (same sequence, later issued_at) while
--   it waits.
-- * revocation_epoch: the epoch the manifest carries.
-- The columns are all set or all NULL: a row staged before this version has
-- no manifest and is served without one (runtimes reject it).
ALTER TABLE configpub.candidate_pointer
	ADD COLUMN sequence             bigint CHECK (sequence > 0),
	ADD COLUMN activated_at         timestamptz,
	ADD COLUMN issued_at            timestamptz,
	ADD COLUMN lease_refresh_after  timestamptz,
	ADD COLUMN lease_expires_at     timestamptz,
	ADD COLUMN revocation_epoch     bigint,
	ADD COLUMN manifest             bytea,
	ADD COLUMN manifest_signature   text,
	ADD COLUMN manifest_key_id      text,
	ADD CONSTRAINT candidate_pointer_manifest_complete CHECK (
		num_nulls(sequence, activated_at, issued_at, lease_refresh_after, lease_expires_at, revocation_epoch,
			manifest, manifest_signature, manifest_key_id) IN (0, 9));

GRANT UPDATE (sequence, activated_at, issued_at, lease_refresh_after, lease_expires_at, revocation_epoch,
	manifest, manifest_signature, manifest_key_id) ON configpub.candidate_pointer TO configpub_promoter;
