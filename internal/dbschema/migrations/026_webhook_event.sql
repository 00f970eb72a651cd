-- Version 26: the notifications themselves, so that one a receiver missed
-- can be delivered again.
--
-- A command that changes a release notifies the webhook receivers in the
-- background and waits for them only a few seconds before it exits, so a
-- receiver that was down then (a deploy, a 503 for a minute) never got the
-- event, and webhook_delivery recorded only that it failed. webhook_event
-- keeps each event as it was sent (its id, kind, environment and release,
-- and the event JSON of the delivery body), recorded before the first
-- attempt; configpub webhook redeliver sends each configured receiver the
-- events recorded since a cutoff that it has not accepted (no delivered
-- attempt) and did not refuse for good (a 4xx other than 408 and 429), with
-- the same event id, which receivers deduplicate on.
CREATE TABLE configpub.webhook_event (
	event_id         uuid PRIMARY KEY,
	event_kind       text NOT NULL CHECK (event_kind <> ''),
	env_tag          text NOT NULL,
	release_version  bigint,
	event            jsonb NOT NULL,
	recorded_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_event_recorded ON configpub.webhook_event (recorded_at);

CREATE TRIGGER webhook_event_append_only BEFORE UPDATE OR DELETE ON configpub.webhook_event
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER webhook_event_no_truncate BEFORE TRUNCATE ON configpub.webhook_event
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

GRANT SELECT, INSERT ON configpub.webhook_event TO configpub_promoter;
GRANT SELECT ON configpub.webhook_event TO configpub_viewer;
