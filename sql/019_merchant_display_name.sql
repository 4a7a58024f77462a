-- A merchant's name for people (the console's lists and pickers); its id
-- stays the key every row and token names. Merchants onboarded before the
-- name existed are named by their id, as onboarding without a name does.
ALTER TABLE merchants ADD COLUMN display_name text;
UPDATE merchants SET display_name = id;
ALTER TABLE merchants ALTER COLUMN display_name SET NOT NULL;
