-- 0014_api_key_expiry (PostgreSQL): ../0014_api_key_expiry.sql.
ALTER TABLE api_keys ADD COLUMN expires_at BIGINT;
