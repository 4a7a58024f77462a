-- A token's `jti` is unique within its issuer's tokens for one subject at
-- most: an external issuer may give two accounts' tokens the same one. An
-- ended token is therefore the pair (account, jti): one account's logout
-- never ends another's token, and a second account's logout of a `jti`
-- already recorded for another is recorded too.
ALTER TABLE ended_tokens DROP CONSTRAINT ended_tokens_pkey;
ALTER TABLE ended_tokens ADD PRIMARY KEY (account_id, jti);
