-- Overrides may expire: at `expires_at` the override stops counting on every
-- replica (each keeps a timer), and one of them removes the row with an
-- `override_expired` audit entry. Rows that have expired are looked up by time.
ALTER TABLE permission_overrides ADD COLUMN expires_at timestamptz;
CREATE INDEX permission_overrides_expiring ON permission_overrides (expires_at) WHERE expires_at IS NOT NULL;
