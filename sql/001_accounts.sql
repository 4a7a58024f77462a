-- Merchants and administrator accounts.

CREATE TABLE merchants (
  id         text PRIMARY KEY CHECK (lower(id) <> 'global'),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sub_roles (
  code       text PRIMARY KEY,
  is_root    boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO sub_roles (code, is_root) VALUES ('super_admin', true);

CREATE TABLE admin_accounts (
  id             uuid PRIMARY KEY,
  email          text NOT NULL,
  password_hash  text NOT NULL,
  name           text NOT NULL,
  phone          text,
  principal_type text NOT NULL CHECK (principal_type IN ('system_owner', 'merchant')),
  merchant_id    text REFERENCES merchants (id),
  sub_role_code  text NOT NULL REFERENCES sub_roles (code),
  parent_role    text CHECK (parent_role IN ('system_owner', 'merchant')),
  created_by     uuid REFERENCES admin_accounts (id),
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now(),
  CHECK ((principal_type = 'merchant') = (merchant_id IS NOT NULL))
);

-- E-mail addresses are unique whatever their case.
CREATE UNIQUE INDEX admin_accounts_email_key ON admin_accounts (lower(email));

-- One super_admin per merchant and one for the system owner.
CREATE UNIQUE INDEX admin_accounts_one_super_admin
  ON admin_accounts (coalesce(merchant_id, ''))
  WHERE sub_role_code = 'super_admin';

CREATE INDEX admin_accounts_merchant ON admin_accounts (merchant_id);
