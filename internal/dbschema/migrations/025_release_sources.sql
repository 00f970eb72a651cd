-- Version 25: the digest of the policy sources each release was compiled
-- from.
--
-- config_release.sources_digest is the digest of a release's inputs (the
-- files its root records and each host's inputs digest), as configpub plan
-- compares them: a release compiled from the same sources as its base is a
-- renewal (configpub compile --renew), which re-issues snapshots whose
-- activation windows end and changes no policy. The console tells renewals
-- from policy changes by it. Set when the release is recorded and never
-- changed; '' for a release recorded before this version.
ALTER TABLE configpub.config_release ADD COLUMN sources_digest text NOT NULL DEFAULT ''
	CONSTRAINT config_release_sources_digest_check CHECK (sources_digest = '' OR sources_digest ~ '^sha256:[0-9a-f]{64}$');

CREATE FUNCTION configpub.guard_release_sources() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'configpub.config_release %/%: the sources digest is immutable',
		OLD.env_tag, OLD.release_version USING ERRCODE = 'CP002';
END
$$;
CREATE TRIGGER config_release_sources_immutable BEFORE UPDATE ON configpub.config_release
	FOR EACH ROW WHEN (NEW.sources_digest IS DISTINCT FROM OLD.sources_digest)
	EXECUTE FUNCTION configpub.guard_release_sources();
