-- Version 10: staged releases, two-phase activation, health gate, freeze
-- windows and webhook notifications.
--
-- * config_release.lifecycle_state gains STAGED (recorded with its snapshots
--   and bytes, no pointer moved) and FAILED (a candidate was rejected, or
--   the release can never be activated; no pointer moved).
-- * config_release.rollout: the environment's rollout policy as compiled
--   with the release (activation mode, freeze windows, health gate); set
--   when the release is recorded and never changed.
-- * candidate_pointer: the candidate snapshot of each identity of a STAGED
--   release, served by the Config Server for configPhase=candidate. Rows
--   are removed when the release is activated or fails.
-- * webhook_delivery: one append-only row per notification attempt.
ALTER TABLE configpub.config_release DROP CONSTRAINT config_release_lifecycle_state_check;
ALTER TABLE configpub.config_release ADD CONSTRAINT config_release_lifecycle_state_check
	CHECK (lifecycle_state IN ('RECORDED', 'STAGED', 'ACTIVE', 'SUPERSEDED', 'ROLLED_BACK', 'FAILED'));

ALTER TABLE configpub.config_release ADD COLUMN rollout jsonb NOT NULL DEFAULT '{}';

CREATE FUNCTION configpub.guard_release_rollout() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'configpub.config_release %/%: the rollout policy is immutable',
		OLD.env_tag, OLD.release_version USING ERRCODE = 'CP002';
END
$$;
CREATE TRIGGER config_release_rollout_immutable BEFORE UPDATE ON configpub.config_release
	FOR EACH ROW WHEN (NEW.rollout IS DISTINCT FROM OLD.rollout)
	EXECUTE FUNCTION configpub.guard_release_rollout();

CREATE TABLE configpub.candidate_pointer (
	host             text NOT NULL,
	service_id       text NOT NULL,
	env_tag          text NOT NULL,
	release_version  bigint NOT NULL CHECK (release_version > 0),
	snapshot_id      uuid NOT NULL,
	staged_at        timestamptz NOT NULL,
	PRIMARY KEY (host, service_id, env_tag, release_version),
	FOREIGN KEY (env_tag, release_version) REFERENCES configpub.config_release (env_tag, release_version),
	FOREIGN KEY (snapshot_id, host, service_id, env_tag)
		REFERENCES configpub.config_snapshot (snapshot_id, host, service_id, env_tag)
);
CREATE INDEX candidate_pointer_release ON configpub.candidate_pointer (env_tag, release_version);

CREATE TABLE configpub.webhook_delivery (
	delivery_id      bigserial PRIMARY KEY,
	event_id         uuid NOT NULL,
	event_kind       text NOT NULL CHECK (event_kind <> ''),
	env_tag          text NOT NULL,
	release_version  bigint,
	receiver         text NOT NULL CHECK (receiver <> ''),
	attempt          integer NOT NULL CHECK (attempt > 0),
	delivered        boolean NOT NULL,
	http_status      integer,
	error            text NOT NULL DEFAULT '' CHECK (error !~ '[[:cntrl:]]'),
	attempted_at     timestamptz NOT NULL,
	duration_ms      bigint NOT NULL CHECK (duration_ms >= 0)
);
CREATE INDEX webhook_delivery_event ON configpub.webhook_delivery (event_id, attempt);
CREATE INDEX webhook_delivery_env ON configpub.webhook_delivery (env_tag, delivery_id);

CREATE TRIGGER webhook_delivery_append_only BEFORE UPDATE OR DELETE ON configpub.webhook_delivery
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER webhook_delivery_no_truncate BEFORE TRUNCATE ON configpub.webhook_delivery
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

GRANT SELECT, INSERT, DELETE ON configpub.candidate_pointer TO configpub_promoter;
GRANT SELECT, INSERT ON configpub.webhook_delivery TO configpub_promoter;
GRANT USAGE ON SEQUENCE configpub.webhook_delivery_delivery_id_seq TO configpub_promoter;
GRANT SELECT ON configpub.candidate_pointer TO configpub_server;
GRANT SELECT ON configpub.candidate_pointer, configpub.webhook_delivery TO configpub_viewer;
