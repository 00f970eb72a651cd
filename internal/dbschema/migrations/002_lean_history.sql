-- Version 2: fewer per-row checks on the bulk paths of an activation.
--
-- config_release_target rows are written in the same transaction as their
-- config_release row and are append-only, and delivery_manifest rows are
-- written together with the current_pointer row that carries the same
-- snapshot (current_pointer keeps its identity-checking foreign key), so
-- these two foreign keys only added one RI trigger call per row. The
-- identity index duplicated lookups nothing performs.
ALTER TABLE configpub.config_release_target
	DROP CONSTRAINT config_release_target_env_tag_release_version_fkey;
ALTER TABLE configpub.delivery_manifest
	DROP CONSTRAINT delivery_manifest_snapshot_id_host_service_id_env_tag_fkey;
DROP INDEX configpub.config_snapshot_identity;
