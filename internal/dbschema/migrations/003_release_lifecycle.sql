-- Version 3: the release lifecycle over months.
--
-- * environment.revocation_epoch: the authoritative revocation epoch every
--   delivery manifest of the environment carries (at least the snapshot's
--   compiled epoch); raised by `configpub revoke --epoch`, never lowered.
-- * config_snapshot.valid_from / expires_at: the envelope's activation
--   window; a pointer may only be moved to the snapshot inside it. NULL for
--   snapshots recorded before version 3 (no window known: not checked).
-- * current_pointer.retired_at / retired_release_version: an identity the
--   active release does not contain is retired (served 410 Gone, no lease
--   renewals); the row keeps its last snapshot and sequence so that a later
--   activation that restores it issues a higher sequence.
-- * pointer_move.retired: the audit row of a retirement (previous and next
--   snapshot are the snapshot the identity was retired from).
-- * delivery_manifest.kind 'resign': a manifest re-signed for the same
--   snapshot with a new sequence (a raised revocation epoch).
ALTER TABLE configpub.environment
	ADD COLUMN revocation_epoch bigint NOT NULL DEFAULT 0 CHECK (revocation_epoch >= 0);

ALTER TABLE configpub.config_snapshot
	ADD COLUMN valid_from timestamptz,
	ADD COLUMN expires_at timestamptz,
	ADD CONSTRAINT config_snapshot_window CHECK (valid_from IS NULL OR expires_at IS NULL OR valid_from < expires_at);

ALTER TABLE configpub.current_pointer
	ADD COLUMN retired_at timestamptz,
	ADD COLUMN retired_release_version bigint,
	ADD CONSTRAINT current_pointer_retired CHECK ((retired_at IS NULL) = (retired_release_version IS NULL));

ALTER TABLE configpub.pointer_move
	ADD COLUMN retired boolean NOT NULL DEFAULT false;

ALTER TABLE configpub.delivery_manifest DROP CONSTRAINT delivery_manifest_kind_check;
ALTER TABLE configpub.delivery_manifest
	ADD CONSTRAINT delivery_manifest_kind_check CHECK (kind IN ('move', 'renew', 'resign'));

GRANT SELECT (valid_from, expires_at) ON configpub.config_snapshot TO configpub_workflow_reader;
