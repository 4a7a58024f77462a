-- The audit chain as far as a verification last found it whole: the last
-- row it walked, that row's hash and the chain's length up to it. A repeat
-- verification starts here and reads only the rows after it; a full one
-- (`audit verify` on the command line) starts from the first row whatever
-- this says, and clears it when it finds a problem. One row, moved forward
-- only by a compare-and-set on the values a verification started from.
CREATE TABLE audit_checkpoint (
  id          int PRIMARY KEY CHECK (id = 1),
  last_id     bigint NOT NULL,
  row_hash    text NOT NULL,
  rows        bigint NOT NULL,
  verified_at timestamptz
);
INSERT INTO audit_checkpoint (id, last_id, row_hash, rows) VALUES (1, 0, repeat('0', 64), 0);

-- An account whose password was generated (the first start's, a reset by
-- the command line) must choose its own: the console asks before anything
-- else, and a change of password clears it.
ALTER TABLE admin_accounts ADD COLUMN must_change_password boolean NOT NULL DEFAULT false;
