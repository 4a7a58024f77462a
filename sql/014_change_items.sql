-- The public change stream (GET /v2/admin/changes): one row per change a
-- decision depends on, written in the same transaction as the change and its
-- audit row, numbered by the write's revision and its place in that write.
-- Rows older than CHANGE_RETENTION_DAYS are pruned by later writes;
-- change_horizon remembers the newest revision pruned, so a reader asking
-- from before it is told (410) instead of silently missing changes.
CREATE TABLE change_items (
  revision    bigint NOT NULL,
  idx         integer NOT NULL,
  time        timestamptz NOT NULL DEFAULT now(),
  kind        text NOT NULL,
  domain      text NOT NULL,
  -- Which merchant may see it: its own, '*' for every tenant, null for system owners only (audienceOf).
  audience    text,
  sub_role    text,
  user_id     text,
  obj         text,
  act         text,
  effect      text,
  expires_at  timestamptz,
  event       text,
  actor_id    text NOT NULL,
  PRIMARY KEY (revision, idx)
);
CREATE INDEX change_items_time ON change_items (time);
CREATE INDEX change_items_audience ON change_items (audience, revision);

CREATE TABLE change_horizon (
  id             int PRIMARY KEY CHECK (id = 1),
  pruned_through bigint NOT NULL
);
-- Revisions written before this table existed have no items: a reader cannot start before them.
INSERT INTO change_horizon (id, pruned_through) SELECT 1, revision FROM store_revision WHERE id = 1;
