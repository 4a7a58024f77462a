-- Sub-roles belong to a domain: codes are unique per domain, not across the
-- platform, so one merchant's sub-role neither blocks, nor is joined, listed
-- or detected by another merchant. A `global` sub-role is a template known in
-- every domain; only `global` sub-roles may be root.
--
-- Which domain each existing sub-role goes to. The domains that ever used a
-- code are: the domain it was created in (`created_domain`), the home domains
-- of the accounts holding it, and the domains of its casbin_rule rows (p rows
-- granting it something, g rows assigning it). Then:
--   * root sub-roles stay in `global`;
--   * a code used by exactly one domain, and that domain a merchant, moves to
--     that merchant, label included;
--   * every other code (used in `global`, by two or more merchants, or never
--     used) stays in `global`, so every account and grant keeps working. When
--     such a code was created by a merchant, its label stays with that
--     merchant: the creator gets a row of its own with the label, and the
--     `global` row keeps none (the label was written for one merchant's
--     people, not as a platform template).
-- A row inserted without a domain is a `global` template, as every row was
-- before. After this, every code an account holds or a rule names in domain D has a
-- row in D or in `global`; the service keeps it so.

-- An account's sub-role is a row of its home domain or of `global`; one
-- foreign key cannot say "either", so a trigger says it, with a foreign key's
-- SQLSTATE (sub-roles are never removed, so only the account side is checked).
ALTER TABLE admin_accounts DROP CONSTRAINT admin_accounts_sub_role_code_fkey;

ALTER TABLE sub_roles DROP CONSTRAINT sub_roles_pkey, ADD COLUMN domain text NOT NULL DEFAULT 'global';

WITH uses AS (
  SELECT code, created_domain AS domain FROM sub_roles WHERE created_domain IS NOT NULL
  UNION SELECT sub_role_code, coalesce(merchant_id, 'global') FROM admin_accounts
  UNION SELECT v0, v1 FROM casbin_rule WHERE ptype = 'p'
  UNION SELECT v1, v2 FROM casbin_rule WHERE ptype = 'g'
), sole_merchant AS (
  SELECT code, min(domain) AS domain FROM uses GROUP BY code HAVING count(*) = 1 AND min(domain) <> 'global'
)
UPDATE sub_roles s SET domain = m.domain FROM sole_merchant m WHERE s.code = m.code AND NOT s.is_root;

INSERT INTO sub_roles (domain, code, is_root, label, created_at)
SELECT created_domain, code, false, label, created_at FROM sub_roles
 WHERE domain = 'global' AND NOT is_root AND created_domain IS NOT NULL AND created_domain <> 'global';
UPDATE sub_roles SET label = NULL
 WHERE domain = 'global' AND NOT is_root AND created_domain IS NOT NULL AND created_domain <> 'global';

ALTER TABLE sub_roles
  ADD PRIMARY KEY (domain, code),
  ADD CONSTRAINT sub_roles_root_is_global CHECK (domain = 'global' OR NOT is_root),
  DROP COLUMN created_domain;

CREATE FUNCTION admin_accounts_sub_role_known() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (
    SELECT 1 FROM sub_roles WHERE code = NEW.sub_role_code AND domain IN (coalesce(NEW.merchant_id, 'global'), 'global')
  ) THEN
    RAISE EXCEPTION 'sub-role % is not known in %', NEW.sub_role_code, coalesce(NEW.merchant_id, 'global')
      USING ERRCODE = 'foreign_key_violation';
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER admin_accounts_sub_role_known
  BEFORE INSERT OR UPDATE OF sub_role_code, merchant_id ON admin_accounts
  FOR EACH ROW EXECUTE FUNCTION admin_accounts_sub_role_known();
