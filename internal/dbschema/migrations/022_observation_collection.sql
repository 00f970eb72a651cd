-- Version 22: collecting superseded APPLIED observations.
--
-- A runtime that reports its loads (`configpub fetch --report`, or the
-- runtime library's ReportEvidence) posts an APPLIED observation for every
-- new snapshot and every renewed lease: with leases renewed hourly at
-- 100,000 runtimes, 2.4 million rows a day for as long as the store lives.
-- Nothing reads an observation once a later one of the same identity exists,
-- except the console's list of a target's latest reports: status shows the
-- last observation, and states, acknowledgements, the health gate and
-- two-phase activation read receipts only.
--
-- configpub.collect_observations deletes the APPLIED observations reported
-- before a cutoff that a later observation of the same identity supersedes,
-- for a bounded range of identities per call (in current_pointer order, from
-- after the identity given), and keeps one summary row per call in
-- configpub.collected_observations. It never deletes a receipt, a REJECTED
-- observation or the newest observation of an identity. It is the only way
-- a runtime_evidence row is ever deleted: no role holds DELETE on the table,
-- and its append-only trigger lets a DELETE through only while the function
-- runs.
CREATE TABLE configpub.collected_observations (
	collection_id       bigserial PRIMARY KEY,
	reported_before     timestamptz NOT NULL,
	identities          integer NOT NULL,
	observations        bigint NOT NULL CHECK (observations > 0),
	bytes               bigint NOT NULL,
	oldest_reported_at  timestamptz NOT NULL,
	newest_reported_at  timestamptz NOT NULL,
	collected_at        timestamptz NOT NULL DEFAULT now(),
	collected_by        text NOT NULL DEFAULT session_user
);
CREATE TRIGGER collected_observations_append_only BEFORE UPDATE OR DELETE ON configpub.collected_observations
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER collected_observations_no_truncate BEFORE TRUNCATE ON configpub.collected_observations
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

DROP TRIGGER runtime_evidence_append_only ON configpub.runtime_evidence;
CREATE TRIGGER runtime_evidence_append_only BEFORE UPDATE OR DELETE ON configpub.runtime_evidence
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation_unless_collecting('configpub.collecting_observations');

-- superseded_observation: the APPLIED observations a later observation of
-- the same identity supersedes.
CREATE VIEW configpub.superseded_observation AS
SELECT e.evidence_id, e.host, e.service_id, e.env_tag, e.reported_at, pg_column_size(e.*)::bigint AS size
FROM configpub.runtime_evidence e
WHERE e.kind = 'observation' AND e.outcome = 'APPLIED'
  AND EXISTS (SELECT 1 FROM configpub.runtime_evidence l
	WHERE l.env_tag = e.env_tag AND l.host = e.host AND l.service_id = e.service_id
	  AND l.evidence_id > e.evidence_id AND l.kind = 'observation');

-- collect_observations scans at most max_identities identities after
-- (after_host, after_service_id, after_env_tag) (NULLs: from the first) and
-- returns the last identity scanned (NULL when none was left), how many it
-- scanned, and what it deleted.
CREATE FUNCTION configpub.collect_observations(reported_before timestamptz, after_host text, after_service_id text,
	after_env_tag text, max_identities integer)
RETURNS TABLE (last_host text, last_service_id text, last_env_tag text, identities integer,
	observations bigint, bytes bigint, oldest_reported_at timestamptz, newest_reported_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
	IF reported_before IS NULL OR max_identities IS NULL OR max_identities < 1 THEN
		RAISE EXCEPTION 'configpub.collect_observations: want a cutoff time and a positive number of identities'
			USING ERRCODE = '22023';
	END IF;
	PERFORM set_config('configpub.collecting_observations', 'on', true);
	RETURN QUERY
	WITH ids AS MATERIALIZED (
		SELECT p.host, p.service_id, p.env_tag FROM configpub.current_pointer p
		WHERE after_host IS NULL OR (p.host, p.service_id, p.env_tag) > (after_host, after_service_id, after_env_tag)
		ORDER BY p.host, p.service_id, p.env_tag
		LIMIT max_identities),
	doomed AS MATERIALIZED (
		SELECT r.evidence_id, r.reported_at, r.size FROM ids i
		JOIN LATERAL (SELECT s.evidence_id, s.reported_at, s.size FROM configpub.superseded_observation s
			WHERE s.env_tag = i.env_tag AND s.host = i.host AND s.service_id = i.service_id
			  AND s.reported_at < reported_before) r ON true),
	gone AS (
		DELETE FROM configpub.runtime_evidence d USING doomed g
		WHERE d.evidence_id = g.evidence_id
		RETURNING d.reported_at, g.size),
	summary AS (
		SELECT count(*) AS n, coalesce(sum(g.size), 0)::bigint AS b, min(g.reported_at) AS lo, max(g.reported_at) AS hi FROM gone g),
	recorded AS (
		INSERT INTO configpub.collected_observations (reported_before, identities, observations, bytes, oldest_reported_at, newest_reported_at)
		SELECT reported_before, (SELECT count(*) FROM ids), s.n, s.b, s.lo, s.hi FROM summary s WHERE s.n > 0
		RETURNING 1),
	last AS (
		SELECT i.host, i.service_id, i.env_tag FROM ids i
		ORDER BY i.host DESC, i.service_id DESC, i.env_tag DESC LIMIT 1)
	SELECT l.host, l.service_id, l.env_tag, (SELECT count(*)::integer FROM ids), s.n, s.b, s.lo, s.hi
	FROM summary s LEFT JOIN last l ON true;
	PERFORM set_config('configpub.collecting_observations', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION configpub.collect_observations(timestamptz, text, text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION configpub.collect_observations(timestamptz, text, text, text, integer) TO configpub_promoter;

GRANT SELECT ON configpub.superseded_observation TO configpub_promoter;
GRANT SELECT ON configpub.collected_observations TO configpub_promoter;
GRANT SELECT ON configpub.collected_observations TO configpub_viewer;
