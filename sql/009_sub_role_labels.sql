-- Sub-roles created explicitly (create-sub-role) carry a label for people and
-- the domain of the admin who created them, which decides where the sub-role
-- is listed before anyone holds it or is granted anything with it. Sub-roles
-- created on first use keep both null.
ALTER TABLE sub_roles
  ADD COLUMN label text,
  ADD COLUMN created_domain text;
