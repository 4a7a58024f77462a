-- Casbin policy, per-user overrides, the permission catalog, the audit trail
-- and the store-wide change counter.

-- The standard Casbin table, readable by any Casbin adapter:
--   p, <sub-role>, <domain>, <obj>, <act>, <allow|deny>
--   g, <user id>, <sub-role>, <domain>
CREATE TABLE casbin_rule (
  id    bigserial PRIMARY KEY,
  ptype text NOT NULL,
  v0    text NOT NULL DEFAULT '',
  v1    text NOT NULL DEFAULT '',
  v2    text NOT NULL DEFAULT '',
  v3    text NOT NULL DEFAULT '',
  v4    text NOT NULL DEFAULT '',
  v5    text NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX casbin_rule_unique ON casbin_rule (ptype, v0, v1, v2, v3, v4, v5);
-- Filtered loads read one domain (v1 of p rows, v2 of g rows).
CREATE INDEX casbin_rule_p_domain ON casbin_rule (v1) WHERE ptype = 'p';
CREATE INDEX casbin_rule_g_domain ON casbin_rule (v2) WHERE ptype = 'g';

CREATE TABLE permission_overrides (
  user_id    uuid NOT NULL REFERENCES admin_accounts (id),
  domain     text NOT NULL,
  obj        text NOT NULL,
  act        text NOT NULL,
  effect     text NOT NULL CHECK (effect IN ('allow', 'deny')),
  set_by     text NOT NULL,
  set_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, domain, obj, act)
);
CREATE INDEX permission_overrides_domain ON permission_overrides (domain);

CREATE TABLE permission_catalog (
  obj        text NOT NULL,
  act        text NOT NULL,
  label      text NOT NULL,
  group_name text NOT NULL,
  is_active  boolean NOT NULL DEFAULT true,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (obj, act)
);

-- One row per audited change. Rows form a hash chain: row_hash covers the
-- row's content and prev_hash, the row_hash of the row before it.
CREATE TABLE permission_audit (
  id          bigserial PRIMARY KEY,
  action      text NOT NULL,
  target_type text NOT NULL CHECK (target_type IN ('role', 'user', 'permission')),
  target_id   text NOT NULL,
  obj         text,
  act         text,
  domain      text,
  -- The merchant whose tenant the entry belongs to (null: platform-wide).
  merchant_id text,
  actor_id    text NOT NULL,
  actor_type  text NOT NULL,
  ip          text,
  created_at  timestamptz NOT NULL,
  prev_hash   text NOT NULL,
  row_hash    text NOT NULL
);

-- One row: the store's change counter and the audit chain's head. Every write
-- locks and bumps it in its own transaction, which also serialises writers,
-- so concurrent writers still form one chain.
CREATE TABLE store_revision (
  id         int PRIMARY KEY CHECK (id = 1),
  revision   bigint NOT NULL,
  audit_head text NOT NULL
);
INSERT INTO store_revision (id, revision, audit_head) VALUES (1, 0, repeat('0', 64));
