-- A change-stream read names a cursor and at most an audience and a domain,
-- and reads in (revision, idx) order up to a limit: with these indexes each
-- filter is read in that order from its own index and stops at the limit,
-- instead of scanning every item after the cursor (a domain had no index)
-- and sorting them.
DROP INDEX change_items_audience;
CREATE INDEX change_items_audience ON change_items (audience, revision, idx);
CREATE INDEX change_items_domain ON change_items (domain, revision, idx);
