-- Version 28: the console finds a target among 100,000 by one index look-up.
--
-- The console's target search (/targets?q=) matches a target whose identity
-- (host/serviceId) or service ID starts with what the operator typed. No
-- index served either: the primary key (host, service_id, env_tag) and
-- current_pointer_env (env_tag, host, service_id) compare text in the
-- database's collation, which a prefix range cannot use unless that
-- collation is C, and neither leads with service_id. text_pattern_ops
-- compares bytes whatever the collation, so the search's range
-- (identity ~>=~ q AND identity ~<~ q') and its service ID match are index
-- scans, with the query's parameters bound at any time (a generic plan).
CREATE INDEX current_pointer_identity_prefix
	ON configpub.current_pointer ((host || '/' || service_id) text_pattern_ops);
CREATE INDEX current_pointer_service_prefix
	ON configpub.current_pointer (service_id text_pattern_ops);
