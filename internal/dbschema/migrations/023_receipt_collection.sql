-- Version 23: collecting repeated APPLIED receipts.
--
-- `configpub readback` records a receipt whenever a runtime's state differs
-- from every receipt already recorded, and a renewed lease is a new load
-- (a new loadedAt): a readback scheduled after every `lease renew` records
-- one receipt per runtime per renewal, for as long as the store lives.
-- What receipts are read for is the first receipt of a state after a
-- pointer move (acknowledgement, applied times in history and the console),
-- the latest one (what runs, state, the health gate) and the rejections;
-- an APPLIED receipt with an identical one before it in the same move span
-- and another after it changes none of them.
--
-- configpub.collect_receipts deletes such receipts reported before a cutoff,
-- for a bounded range of identities per call, and keeps one summary row per
-- call in configpub.collected_receipts. It never deletes a REJECTED receipt,
-- a candidate-phase receipt (two-phase activation), the first receipt of a
-- state after a move or the last one of a state. Like the observations'
-- collection, it is the only way such a row is deleted.
CREATE TABLE configpub.collected_receipts (
	collection_id       bigserial PRIMARY KEY,
	reported_before     timestamptz NOT NULL,
	identities          integer NOT NULL,
	receipts            bigint NOT NULL CHECK (receipts > 0),
	bytes               bigint NOT NULL,
	oldest_reported_at  timestamptz NOT NULL,
	newest_reported_at  timestamptz NOT NULL,
	collected_at        timestamptz NOT NULL DEFAULT now(),
	collected_by        text NOT NULL DEFAULT session_user
);
CREATE TRIGGER collected_receipts_append_only BEFORE UPDATE OR DELETE ON configpub.collected_receipts
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER collected_receipts_no_truncate BEFORE TRUNCATE ON configpub.collected_receipts
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

-- runtime_evidence's append-only trigger lets a DELETE through while either
-- collection runs.
CREATE FUNCTION configpub.refuse_evidence_mutation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' AND (current_setting('configpub.collecting_observations', true) = 'on'
		OR current_setting('configpub.collecting_receipts', true) = 'on') THEN
		RETURN OLD;
	END IF;
	RAISE EXCEPTION 'configpub.% is append-only: % refused', TG_TABLE_NAME, TG_OP
		USING ERRCODE = 'CP001';
END
$$;
DROP TRIGGER runtime_evidence_append_only ON configpub.runtime_evidence;
CREATE TRIGGER runtime_evidence_append_only BEFORE UPDATE OR DELETE ON configpub.runtime_evidence
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_evidence_mutation();

-- superseded_receipt: the current-phase APPLIED receipts with a receipt of
-- the same state (snapshot and running snapshot) of the same identity before
-- them, with no pointer move of the identity in between, and one after them.
CREATE VIEW configpub.superseded_receipt AS
SELECT r.evidence_id, r.host, r.service_id, r.env_tag, r.reported_at, pg_column_size(r.*)::bigint AS size
FROM configpub.runtime_evidence r
WHERE r.kind = 'receipt' AND r.phase = 'current' AND r.outcome = 'APPLIED'
  AND EXISTS (SELECT 1 FROM configpub.runtime_evidence e
	WHERE e.env_tag = r.env_tag AND e.host = r.host AND e.service_id = r.service_id
	  AND e.evidence_id < r.evidence_id AND e.kind = 'receipt' AND e.phase = 'current' AND e.outcome = 'APPLIED'
	  AND e.snapshot_id = r.snapshot_id AND e.running_snapshot_id IS NOT DISTINCT FROM r.running_snapshot_id
	  AND e.reported_at <= r.reported_at
	  AND NOT EXISTS (SELECT 1 FROM configpub.pointer_move m
		WHERE m.env_tag = r.env_tag AND m.host = r.host AND m.service_id = r.service_id
		  AND m.moved_at > e.reported_at AND m.moved_at <= r.reported_at))
  AND EXISTS (SELECT 1 FROM configpub.runtime_evidence l
	WHERE l.env_tag = r.env_tag AND l.host = r.host AND l.service_id = r.service_id
	  AND l.evidence_id > r.evidence_id AND l.kind = 'receipt' AND l.phase = 'current' AND l.outcome = 'APPLIED'
	  AND l.snapshot_id = r.snapshot_id AND l.running_snapshot_id IS NOT DISTINCT FROM r.running_snapshot_id
	  AND l.reported_at >= r.reported_at);

-- collect_receipts scans at most max_identities identities after
-- (after_host, after_service_id, after_env_tag) (NULLs: from the first) and
-- returns the last identity scanned (NULL when none was left), how many it
-- scanned, and what it deleted. The receipts are chosen before any is
-- deleted, so each deletion leaves the first and the last of its run.
CREATE FUNCTION configpub.collect_receipts(reported_before timestamptz, after_host text, after_service_id text,
	after_env_tag text, max_identities integer)
RETURNS TABLE (last_host text, last_service_id text, last_env_tag text, identities integer,
	receipts bigint, bytes bigint, oldest_reported_at timestamptz, newest_reported_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
	IF reported_before IS NULL OR max_identities IS NULL OR max_identities < 1 THEN
		RAISE EXCEPTION 'configpub.collect_receipts: want a cutoff time and a positive number of identities'
			USING ERRCODE = '22023';
	END IF;
	PERFORM set_config('configpub.collecting_receipts', 'on', true);
	RETURN QUERY
	WITH ids AS MATERIALIZED (
		SELECT p.host, p.service_id, p.env_tag FROM configpub.current_pointer p
		WHERE after_host IS NULL OR (p.host, p.service_id, p.env_tag) > (after_host, after_service_id, after_env_tag)
		ORDER BY p.host, p.service_id, p.env_tag
		LIMIT max_identities),
	doomed AS MATERIALIZED (
		SELECT r.evidence_id, r.reported_at, r.size FROM ids i
		JOIN LATERAL (SELECT s.evidence_id, s.reported_at, s.size FROM configpub.superseded_receipt s
			WHERE s.env_tag = i.env_tag AND s.host = i.host AND s.service_id = i.service_id
			  AND s.reported_at < reported_before) r ON true),
	gone AS (
		DELETE FROM configpub.runtime_evidence d USING doomed g
		WHERE d.evidence_id = g.evidence_id
		RETURNING d.reported_at, g.size),
	summary AS (
		SELECT count(*) AS n, coalesce(sum(g.size), 0)::bigint AS b, min(g.reported_at) AS lo, max(g.reported_at) AS hi FROM gone g),
	recorded AS (
		INSERT INTO configpub.collected_receipts (reported_before, identities, receipts, bytes, oldest_reported_at, newest_reported_at)
		SELECT reported_before, (SELECT count(*) FROM ids), s.n, s.b, s.lo, s.hi FROM summary s WHERE s.n > 0
		RETURNING 1),
	last AS (
		SELECT i.host, i.service_id, i.env_tag FROM ids i
		ORDER BY i.host DESC, i.service_id DESC, i.env_tag DESC LIMIT 1)
	SELECT l.host, l.service_id, l.env_tag, (SELECT count(*)::integer FROM ids), s.n, s.b, s.lo, s.hi
	FROM summary s LEFT JOIN last l ON true;
	PERFORM set_config('configpub.collecting_receipts', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION configpub.collect_receipts(timestamptz, text, text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION configpub.collect_receipts(timestamptz, text, text, text, integer) TO configpub_promoter;

GRANT SELECT ON configpub.superseded_receipt TO configpub_promoter;
GRANT SELECT ON configpub.collected_receipts TO configpub_promoter;
GRANT SELECT ON configpub.collected_receipts TO configpub_viewer;
