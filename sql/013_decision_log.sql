-- Gateway decisions written by the `postgres` decision sink, one partition
-- per UTC day so that retention drops a day's table instead of deleting
-- rows one by one. The filters of GET /v2/admin/decisions have their own
-- columns; the whole event is kept as written in `event`.
CREATE TABLE decision_events (
  -- "C" collation: the keyset order (time, decision_id) compares bytes, the same on every server.
  decision_id text COLLATE "C" NOT NULL,
  time        timestamptz NOT NULL,
  user_id     text NOT NULL,
  merchant_id text,
  domain      text NOT NULL,
  obj         text NOT NULL,
  act         text NOT NULL,
  allowed     boolean NOT NULL,
  -- json, not jsonb: kept and given back as written, never queried inside (the filters have columns), and
  -- writing it skips jsonb's conversion, which the sink would pay on every row.
  event       json NOT NULL
) PARTITION BY RANGE (time);

-- Rows for a day whose partition is not there yet (a clock ahead of the
-- maintenance job, a job that failed) land here instead of failing the
-- write; the job moves them into their day's partition when it makes it.
CREATE TABLE decision_events_default PARTITION OF decision_events DEFAULT;

-- Newest first within a user, a merchant or everyone: each list is one
-- ordered index scan per partition, merged.
CREATE INDEX decision_events_user_time ON decision_events (user_id, time DESC, decision_id DESC);
CREATE INDEX decision_events_merchant_time ON decision_events (merchant_id, time DESC, decision_id DESC);
CREATE INDEX decision_events_time ON decision_events (time DESC, decision_id DESC);
CREATE INDEX decision_events_id ON decision_events (decision_id);

-- Makes the partitions of `today` and the next day and drops those of days
-- more than `retention_days` before `today`. The service's role may not own
-- tables (docs/operations.md), so the function runs as its owner, who made
-- the table; it touches nothing but decision_events' partitions. Replicas
-- call it at once: the advisory lock lets one work at a time and the next
-- finds the work done.
CREATE FUNCTION decision_events_maintain(retention_days integer, today date DEFAULT (now() AT TIME ZONE 'UTC')::date)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
-- A long query holding the table must not stall the sink's inserts behind this job's lock queue.
SET lock_timeout = '5s'
AS $$
DECLARE
  day date;
  name text;
  low timestamptz;
  high timestamptz;
  oldest date := today - greatest(retention_days, 1);
  part record;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext(current_schema() || ':decision_events'));
  FOR i IN 0..1 LOOP
    day := today + i;
    name := 'decision_events_p' || to_char(day, 'YYYYMMDD');
    low := day::timestamp AT TIME ZONE 'UTC';
    high := (day + 1)::timestamp AT TIME ZONE 'UTC';
    CONTINUE WHEN to_regclass(format('%I.%I', current_schema(), name)) IS NOT NULL;
    -- Built apart and attached, so that the day's rows already in the default partition move in with it.
    EXECUTE format('CREATE TABLE %I (LIKE decision_events)', name);
    EXECUTE format(
      'WITH moved AS (DELETE FROM decision_events_default WHERE time >= $1 AND time < $2 RETURNING *) INSERT INTO %I SELECT * FROM moved',
      name
    ) USING low, high;
    EXECUTE format('ALTER TABLE decision_events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, low, high);
  END LOOP;
  FOR part IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'decision_events'::regclass AND c.relname ~ '^decision_events_p[0-9]{8}$'
  LOOP
    IF to_date(substr(part.relname, 18), 'YYYYMMDD') < oldest THEN
      EXECUTE format('DROP TABLE %I', part.relname);
    END IF;
  END LOOP;
  DELETE FROM decision_events_default WHERE time < oldest::timestamp AT TIME ZONE 'UTC';
END
$$;

SELECT decision_events_maintain(7);
