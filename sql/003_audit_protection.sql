-- Audit rows are append-only: UPDATE, DELETE and TRUNCATE are refused. (A
-- superuser can still disable the trigger; the hash chain then shows what
-- was changed: `npm run cli -- audit verify`.)
CREATE FUNCTION permission_audit_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'permission_audit is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER permission_audit_no_update_delete
  BEFORE UPDATE OR DELETE ON permission_audit
  FOR EACH ROW EXECUTE FUNCTION permission_audit_append_only();

CREATE TRIGGER permission_audit_no_truncate
  BEFORE TRUNCATE ON permission_audit
  FOR EACH STATEMENT EXECUTE FUNCTION permission_audit_append_only();

-- The audit list is newest first (id order) with optional filters and, for
-- merchant callers, their merchant's entries only.
CREATE INDEX permission_audit_target_id ON permission_audit (target_id, id DESC);
CREATE INDEX permission_audit_target_type ON permission_audit (target_type, id DESC);
CREATE INDEX permission_audit_action ON permission_audit (action, id DESC);
CREATE INDEX permission_audit_merchant ON permission_audit (merchant_id, id DESC);
