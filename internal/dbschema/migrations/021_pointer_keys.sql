-- Version 21: the per-environment and per-release indexes of the pointer
-- tables carry the whole key.
--
-- An activation writes its pointers, and staging its candidate pointers,
-- in one transaction, a batch at a time, so the planner has no statistics
-- for the rows it looks up while it reads and updates the next batch. An
-- index on (env_tag) or (env_tag, release_version) alone then looked as
-- good as the primary key for finding one identity's row, and a look-up by
-- key was planned as a scan of the environment's (or the release's) rows
-- filtered by host and service: at 10,000 targets, seconds per batch of
-- 2,000. With the key in these indexes every look-up by key is one index
-- probe whatever the statistics say, and an environment's pointers, or a
-- release's candidates, are read in (host, service_id) order without a
-- sort.
DROP INDEX configpub.current_pointer_env;
CREATE UNIQUE INDEX current_pointer_env
	ON configpub.current_pointer (env_tag, host, service_id);

DROP INDEX configpub.candidate_pointer_release;
CREATE UNIQUE INDEX candidate_pointer_release
	ON configpub.candidate_pointer (env_tag, release_version, host, service_id);
