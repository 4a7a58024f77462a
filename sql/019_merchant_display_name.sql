-- A merchant's name for people (the console's lists and pickers); its id
-- stays the key every row and token names. A merchant without a name (one
-- onboarded before the name existed, or a row written by other means) is
-- named by its id: the list reads coalesce(display_name, id).
ALTER TABLE merchants ADD COLUMN display_name text;
