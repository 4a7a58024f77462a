-- Failed logins per account, for the per-account limit: one row per attempt
-- that was not (yet) a success, keyed by the lower-cased e-mail whether or not
-- an account has it. The rows live in the database so every server counts
-- the same attempts. Writers prune rows older than the window as they go
-- (src/storage/loginFailures.ts); nothing else reads this table.
CREATE TABLE login_failures (
  id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email     text NOT NULL,
  failed_at timestamptz NOT NULL DEFAULT now()
);

-- One e-mail's failures within the window, newest first.
CREATE INDEX login_failures_email ON login_failures (email, failed_at);
-- Pruning takes the oldest rows first.
CREATE INDEX login_failures_failed_at ON login_failures (failed_at);
