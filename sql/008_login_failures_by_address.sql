-- Login failures counted per account and client address. A failure now
-- records the address it came from (a valid IP address, or null when none
-- could be read); the per-account limit counts the failures of one address
-- (IPv6 by its /64 network), so a stranger's wrong guesses no longer lock the
-- owner out. A higher ceiling over all addresses of one account bounds a
-- guesser who rotates addresses; networks the account logged in from
-- recently are let through that ceiling (src/storage/loginFailures.ts).
ALTER TABLE login_failures ADD COLUMN ip inet;

-- Where each account last logged in successfully: one row per account
-- (lower-cased e-mail) and network (an IPv4 address as /32, IPv6 as /64).
-- Writers prune rows past their keeping time as they go.
CREATE TABLE login_successes (
  email        text NOT NULL,
  network      cidr NOT NULL,
  succeeded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (email, network)
);

-- Pruning takes the oldest rows first.
CREATE INDEX login_successes_succeeded_at ON login_successes (succeeded_at);
