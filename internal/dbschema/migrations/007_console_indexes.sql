-- Version 7: indexes for the operator console's read paths over large
-- environments (indexes only; no table or privilege changes).
--
-- * config_snapshot by release and audience, in the order a release page
--   lists its changed targets: the page reads its first rows and per-audience
--   digests from the index instead of sorting every snapshot of the release.
-- * pointer_move by identity with the move time and snapshot: "what did the
--   environment look like at T" takes each identity's last move at or before
--   T from an index-only scan.
CREATE INDEX config_snapshot_release_audience ON configpub.config_snapshot
	(env_tag, release_version, audience, host, service_id) INCLUDE (snapshot_id, artifact_digest);
CREATE INDEX pointer_move_identity_at ON configpub.pointer_move
	(env_tag, host, service_id, move_id) INCLUDE (moved_at, next_snapshot_id, retired);
