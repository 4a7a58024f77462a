-- Sessions that end (logout). A token ended by itself is remembered by its
-- `jti` until it would have expired, and no longer: the rows past their
-- expiry are deleted by the next logout, and never loaded.
CREATE TABLE ended_tokens (
  jti        text PRIMARY KEY,
  account_id uuid NOT NULL REFERENCES admin_accounts (id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL
);
CREATE INDEX ended_tokens_expiry ON ended_tokens (expires_at);

-- Tokens from an external issuer carry no credentials version, only the
-- instant they were issued (`iat`): they are compared with the account's
-- last deactivation, reactivation, password change or logout everywhere.
ALTER TABLE admin_accounts ADD COLUMN credentials_changed_at timestamptz;

-- Accounts whose credentials changed before this column existed: the instant
-- is not known, so their last update stands in for it (tokens issued before
-- it are refused, as their version already refused them).
UPDATE admin_accounts SET credentials_changed_at = updated_at WHERE credentials_version > 0;
