-- Knowledge control replicas, version 1. Applied by replica.Migrate inside one
-- transaction; schema configpub_knowledge and its ledger already exist.

-- Group roles are cluster-wide: guard against another database of the same
-- cluster creating them concurrently.
DO $$
DECLARE
	r text;
BEGIN
	FOREACH r IN ARRAY ARRAY['configpub_knowledge_loader', 'configpub_knowledge_reader'] LOOP
		BEGIN
			EXECUTE format('CREATE ROLE %I NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r);
		EXCEPTION WHEN duplicate_object OR unique_violation THEN
			NULL;
		END;
	END LOOP;
END
$$;

-- The snapshot whose replica set is materialized, one row per runtime
-- identity. It changes only in the transaction that changes the replicas.
CREATE TABLE configpub_knowledge.applied_snapshot (
	host                     text NOT NULL CHECK (host <> ''),
	service_id               text NOT NULL CHECK (service_id <> ''),
	env_tag                  text NOT NULL CHECK (env_tag <> ''),
	snapshot_id              uuid NOT NULL,
	publication_id           uuid NOT NULL,
	policy_snapshot_id       uuid NOT NULL,
	release_version          bigint NOT NULL CHECK (release_version > 0),
	policy_version           bigint NOT NULL,
	source_event_sequence    bigint NOT NULL,
	revocation_epoch         bigint NOT NULL,
	compatibility_generation bigint NOT NULL,
	manifest_sequence        bigint NOT NULL CHECK (manifest_sequence > 0),
	manifest_issued_at       timestamptz NOT NULL,
	artifact_digest          text NOT NULL CHECK (artifact_digest ~ '^sha256:[0-9a-f]{64}$'),
	content_digest           text NOT NULL CHECK (content_digest ~ '^sha256:[0-9a-f]{64}$'),
	policy_digest            text NOT NULL CHECK (policy_digest ~ '^sha256:[0-9a-f]{64}$'),
	inventory_digest         text NOT NULL CHECK (inventory_digest ~ '^sha256:[0-9a-f]{64}$'),
	item_count               integer NOT NULL CHECK (item_count >= 0),
	applied_at               timestamptz NOT NULL,
	PRIMARY KEY (host, service_id, env_tag)
);

-- One published control replica (knowledge base, retrieval profile, index
-- generation, binding) of an identity's applied snapshot.
CREATE TABLE configpub_knowledge.replica (
	host             text NOT NULL,
	service_id       text NOT NULL,
	env_tag          text NOT NULL,
	kind             text NOT NULL CHECK (kind <> ''),
	item_id          text NOT NULL CHECK (item_id <> ''),
	digest           text NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
	content          jsonb NOT NULL,
	release_version  bigint NOT NULL CHECK (release_version > 0),
	snapshot_id      uuid NOT NULL,
	PRIMARY KEY (host, service_id, env_tag, kind, item_id),
	FOREIGN KEY (host, service_id, env_tag)
		REFERENCES configpub_knowledge.applied_snapshot (host, service_id, env_tag)
		DEFERRABLE INITIALLY DEFERRED
);

-- The loader is the only writer of replicas and the applied pointer; it
-- deletes replicas (tombstones) but never the pointer. The reader (the
-- service's API and job roles) only reads them.
REVOKE ALL ON SCHEMA configpub_knowledge FROM PUBLIC;
GRANT USAGE ON SCHEMA configpub_knowledge TO configpub_knowledge_loader, configpub_knowledge_reader;
GRANT SELECT, INSERT, UPDATE ON configpub_knowledge.applied_snapshot TO configpub_knowledge_loader;
GRANT SELECT, INSERT, UPDATE, DELETE ON configpub_knowledge.replica TO configpub_knowledge_loader;
GRANT SELECT ON configpub_knowledge.schema_migration TO configpub_knowledge_loader;
GRANT SELECT ON configpub_knowledge.applied_snapshot, configpub_knowledge.replica TO configpub_knowledge_reader;
