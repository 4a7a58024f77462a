-- The change feed: one row per committed revision, written in the same
-- transaction as the change, so every replica can apply exactly what changed
-- (in revision order) instead of reloading the whole policy. A NOTIFY on
-- channel aps_changes ("<schema>:<revision>") tells listening replicas to read it.
CREATE TABLE store_changes (
  revision   bigint PRIMARY KEY,
  -- Random per write: lets a writer whose COMMIT got no answer find out whether it committed.
  write_id   uuid NOT NULL UNIQUE,
  changes    jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Refuses to let a transaction commit later than `budget_ms` after it began
-- (server time). A writer sends it with its COMMIT: if the COMMIT is delayed
-- on the network (a partition), it is refused rather than committed after the
-- writer has already answered its client with an error.
CREATE FUNCTION commit_deadline_guard(budget_ms integer) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF clock_timestamp() > now() + make_interval(secs => budget_ms / 1000.0) THEN
    RAISE EXCEPTION 'write deadline passed: the transaction is rolled back'
      USING ERRCODE = 'query_canceled';
  END IF;
END
$$;
