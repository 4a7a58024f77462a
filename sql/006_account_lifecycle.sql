-- Account lifecycle: accounts can be switched off and their credentials
-- replaced. A token carries the credentials version it was issued under
-- (claim `cv`); a password change or reset bumps it, so older tokens are
-- refused at once, on every server, without comparing clocks.
ALTER TABLE admin_accounts
  ADD COLUMN status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deactivated')),
  ADD COLUMN credentials_version integer NOT NULL DEFAULT 0;

-- The account list is newest first, filtered by merchant, sub-role and status.
CREATE INDEX admin_accounts_newest ON admin_accounts (created_at DESC, id DESC);
CREATE INDEX admin_accounts_merchant_newest ON admin_accounts (merchant_id, created_at DESC, id DESC);
CREATE INDEX admin_accounts_sub_role_newest ON admin_accounts (sub_role_code, created_at DESC, id DESC);
CREATE INDEX admin_accounts_status_newest ON admin_accounts (status, created_at DESC, id DESC);
