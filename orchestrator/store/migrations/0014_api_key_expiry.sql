-- 0014_api_key_expiry: a user API key may expire (`filepath apikey create
-- --expires DURATION`). expires_at is Unix milliseconds; NULL is never, as
-- for every key made before this migration and every node key. From
-- expires_at on, the key authenticates no more (401 "API key expired").
ALTER TABLE api_keys ADD COLUMN expires_at INTEGER;
