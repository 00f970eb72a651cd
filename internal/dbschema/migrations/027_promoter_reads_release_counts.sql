-- Version 27: configpub status says which releases a revocation has made
-- impossible to activate again.
--
-- A release whose target mapping holds a revoked snapshot, or a snapshot of
-- a revoked publication, is refused by every activation and rollback, yet
-- status showed it "activatable until" its windows' end. Status (run as
-- configpub_promoter) finds a revoked publication's releases through
-- release_target_release_count (a mapping's targets by snapshot release,
-- maintained by version 14's trigger), which only the viewer could read.
GRANT SELECT ON configpub.release_target_release_count TO configpub_promoter;
