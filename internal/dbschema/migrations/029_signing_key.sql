-- Version 29: the public keys the store has signed with.
--
-- Every signed row records the key id of its signature (delivery_manifest
-- key_id, current_pointer and candidate_pointer manifest_key_id), but not
-- the public key: a process that holds no private key (registry attach)
-- could not check that a delivery manifest no longer in the store (a
-- renewal db gc deleted) was signed by the store, and promote could not
-- tell an artifact signed by a key the store signed with before a key
-- rotation from one whose signature was replaced by another key's.
-- signing_key records each key the first time the store signs with it:
-- its PKIX DER public key, whose SHA-256 the key id is (so a row cannot
-- name a key id another key has), the signature algorithm, and when the
-- store first and last signed with it. Keys used only before this
-- migration are recorded at their next use.
CREATE TABLE configpub.signing_key (
	key_id         text PRIMARY KEY
		CONSTRAINT signing_key_id_is_its_digest CHECK (key_id = 'sha256:' || encode(sha256(public_key), 'hex')),
	public_key     bytea NOT NULL,
	algorithm      text NOT NULL CHECK (algorithm IN ('ecdsa-p256-sha256')),
	first_used_at  timestamptz NOT NULL,
	last_used_at   timestamptz NOT NULL,
	CHECK (last_used_at >= first_used_at)
);

-- A recorded key is never deleted and never changes; only last_used_at
-- moves.
CREATE FUNCTION configpub.refuse_signing_key_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.key_id IS DISTINCT FROM OLD.key_id OR NEW.public_key IS DISTINCT FROM OLD.public_key
		OR NEW.algorithm IS DISTINCT FROM OLD.algorithm OR NEW.first_used_at IS DISTINCT FROM OLD.first_used_at THEN
		RAISE EXCEPTION 'configpub.signing_key % is append-only: only last_used_at changes', OLD.key_id
			USING ERRCODE = 'CP001';
	END IF;
	RETURN NEW;
END
$$;
CREATE TRIGGER signing_key_append_only BEFORE UPDATE ON configpub.signing_key
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_signing_key_change();
CREATE TRIGGER signing_key_no_delete BEFORE DELETE ON configpub.signing_key
	FOR EACH ROW EXECUTE FUNCTION configpub.refuse_mutation();
CREATE TRIGGER signing_key_no_truncate BEFORE TRUNCATE ON configpub.signing_key
	FOR EACH STATEMENT EXECUTE FUNCTION configpub.refuse_mutation();

-- The promoter records keys as it signs and reads them (registry attach,
-- promote); nothing else needs them.
GRANT SELECT, INSERT ON configpub.signing_key TO configpub_promoter;
GRANT UPDATE (last_used_at) ON configpub.signing_key TO configpub_promoter;
