-- Version 17: Config Servers follow pointer changes by a commit-ordered
-- watermark, so that a server reading a hot standby (where NOTIFY does not
-- arrive) and the periodic reconcile of any server read only what changed.
--
-- * current_pointer.change_xid: the transaction (xid8) that last wrote the
--   row, set by a trigger on every INSERT and UPDATE (moves, retirements,
--   lease renewals, re-signs). Transaction ids are not commit-ordered, so a
--   reader remembers a whole snapshot (pg_current_snapshot: its xmax and the
--   transactions in progress) and next reads the rows whose change_xid is at
--   least that xmax or one of those in progress: exactly the rows that
--   became visible since. NULL for rows last written before version 17,
--   which any reader's first full load covers.
-- * revocation.revoked_xid: the same for revocations (a reader reloads every
--   pointer when one appears).
ALTER TABLE configpub.current_pointer ADD COLUMN change_xid xid8;

CREATE FUNCTION configpub.stamp_pointer_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.change_xid := pg_catalog.pg_current_xact_id();
	RETURN NEW;
END
$$;

CREATE TRIGGER current_pointer_change_xid BEFORE INSERT OR UPDATE ON configpub.current_pointer
	FOR EACH ROW EXECUTE FUNCTION configpub.stamp_pointer_change();

CREATE INDEX current_pointer_change_xid ON configpub.current_pointer (change_xid);

ALTER TABLE configpub.revocation ADD COLUMN revoked_xid xid8;
ALTER TABLE configpub.revocation ALTER COLUMN revoked_xid SET DEFAULT pg_catalog.pg_current_xact_id();
CREATE INDEX revocation_revoked_xid ON configpub.revocation (revoked_xid);
