-- Version 20: collecting superseded lease renewals.
--
-- `configpub lease renew` appends one delivery_manifest row per current
-- pointer at every renewal: at 100,000 targets about 140 MB per run, so an
-- hourly renewal adds over 3 GB a day for as long as the store lives. Only
-- the newest manifest of each move is ever served again (for a snapshot
-- that is current, or pinned after it stopped being current); a renewal
-- that a later manifest of the same move (identity and sequence) supersedes
-- is an expired lease kept for the record only.
--
-- configpub.collect_renewals deletes such rows issued before a cutoff, for a
-- bounded range of identities per call (in current_pointer order, from
-- after the identity given), and keeps one summary row per call in
-- configpub.collected_renewals. It never deletes a pointer move's own
-- manifest (kind 'move'), an epoch re-signing ('resign'), or the newest
-- manifest of a move, so what every snapshot is served with does not
-- change. It is the only way a delivery_manifest row is ever deleted: no
-- role holds DELETE on the table, and its append-only trigger lets a DELETE
-- through only while the function runs.
CREATE TABLE configpub.collected_renewals (
	collection_id     bigserial PRIMARY KEY,
	issued_before     timestamptz NOT NULL,
	identities        integer NOT NULL,
	manifests         bigint NOT NULL CHECK (manifests > 0),
	bytes             bigint NOT NULL,
	oldest_issued_at  timestamptz NOT NULL,
	newest_issued_at  timestamptz NOT NULL,
	collected_at      timestamptz NOT NULL DEFAULT now(),
	collected_by      text NOT NULL DEFAULT session_user
);
CREATE TRIGGER collected_renewals_append_only BEFORE UPDATE OR DELETE ON configpub.collected_renewals
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER collected_renewals_no_truncate BEFORE TRUNCATE ON configpub.collected_renewals
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

-- The append-only trigger of a table a collection function deletes from:
-- a DELETE passes while the setting named by the trigger's argument is on
-- (set by that function, in its transaction); anything else is refused.
-- artifact's trigger (version 19) moves to it too.
CREATE FUNCTION configpub.refuse_mutation_unless_collecting() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' AND current_setting(TG_ARGV[0], true) = 'on' THEN
		RETURN OLD;
	END IF;
	RAISE EXCEPTION 'configpub.% is append-only: % refused', TG_TABLE_NAME, TG_OP
		USING ERRCODE = 'CP001';
END
$$;
DROP TRIGGER artifact_append_only ON configpub.artifact;
CREATE TRIGGER artifact_append_only BEFORE UPDATE OR DELETE ON configpub.artifact
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation_unless_collecting('configpub.collecting_artifacts');
DROP FUNCTION configpub.refuse_artifact_mutation();
DROP TRIGGER delivery_manifest_append_only ON configpub.delivery_manifest;
CREATE TRIGGER delivery_manifest_append_only BEFORE UPDATE OR DELETE ON configpub.delivery_manifest
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation_unless_collecting('configpub.collecting_renewals');

-- superseded_renewal: the renewal manifests a later manifest of the same
-- move (identity, sequence; the same snapshot) supersedes.
CREATE VIEW configpub.superseded_renewal AS
SELECT d.host, d.service_id, d.env_tag, d.sequence, d.issued_at,
	octet_length(d.manifest) + octet_length(d.signature) AS size
FROM configpub.delivery_manifest d
WHERE d.kind = 'renew'
  AND EXISTS (SELECT 1 FROM configpub.delivery_manifest l
	WHERE l.host = d.host AND l.service_id = d.service_id AND l.env_tag = d.env_tag
	  AND l.sequence = d.sequence AND l.issued_at > d.issued_at AND l.snapshot_id = d.snapshot_id);

-- collect_renewals scans at most max_identities identities after
-- (after_host, after_service_id, after_env_tag) (NULLs: from the first) and
-- returns the last identity scanned (NULL when none was left), how many it
-- scanned, and what it deleted.
CREATE FUNCTION configpub.collect_renewals(issued_before timestamptz, after_host text, after_service_id text,
	after_env_tag text, max_identities integer)
RETURNS TABLE (last_host text, last_service_id text, last_env_tag text, identities integer,
	manifests bigint, bytes bigint, oldest_issued_at timestamptz, newest_issued_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
BEGIN
	IF issued_before IS NULL OR max_identities IS NULL OR max_identities < 1 THEN
		RAISE EXCEPTION 'configpub.collect_renewals: want a cutoff time and a positive number of identities'
			USING ERRCODE = '22023';
	END IF;
	PERFORM set_config('configpub.collecting_renewals', 'on', true);
	RETURN QUERY
	WITH ids AS MATERIALIZED (
		SELECT p.host, p.service_id, p.env_tag FROM configpub.current_pointer p
		WHERE after_host IS NULL OR (p.host, p.service_id, p.env_tag) > (after_host, after_service_id, after_env_tag)
		ORDER BY p.host, p.service_id, p.env_tag
		LIMIT max_identities),
	gone AS (
		DELETE FROM configpub.delivery_manifest d USING ids i, configpub.superseded_renewal r
		WHERE r.host = i.host AND r.service_id = i.service_id AND r.env_tag = i.env_tag AND r.issued_at < issued_before
		  AND d.host = r.host AND d.service_id = r.service_id AND d.env_tag = r.env_tag
		  AND d.sequence = r.sequence AND d.issued_at = r.issued_at
		RETURNING d.issued_at, r.size),
	summary AS (
		SELECT count(*) AS n, coalesce(sum(g.size), 0)::bigint AS b, min(g.issued_at) AS lo, max(g.issued_at) AS hi FROM gone g),
	recorded AS (
		INSERT INTO configpub.collected_renewals (issued_before, identities, manifests, bytes, oldest_issued_at, newest_issued_at)
		SELECT issued_before, (SELECT count(*) FROM ids), s.n, s.b, s.lo, s.hi FROM summary s WHERE s.n > 0
		RETURNING 1),
	last AS (
		SELECT i.host, i.service_id, i.env_tag FROM ids i
		ORDER BY i.host DESC, i.service_id DESC, i.env_tag DESC LIMIT 1)
	SELECT l.host, l.service_id, l.env_tag, (SELECT count(*)::integer FROM ids), s.n, s.b, s.lo, s.hi
	FROM summary s LEFT JOIN last l ON true;
	PERFORM set_config('configpub.collecting_renewals', 'off', true);
END
$$;
REVOKE ALL ON FUNCTION configpub.collect_renewals(timestamptz, text, text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION configpub.collect_renewals(timestamptz, text, text, text, integer) TO configpub_promoter;

GRANT SELECT ON configpub.superseded_renewal TO configpub_promoter;
GRANT SELECT ON configpub.collected_renewals TO configpub_promoter;
GRANT SELECT ON configpub.collected_renewals TO configpub_viewer;
