-- 0025_secrets (PostgreSQL): ../0025_secrets.sql.
CREATE TABLE secrets (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id  TEXT REFERENCES agent_session(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('vendor', 'git_https', 'git_ssh', 'github_token', 'gitlab_token')),
    host        TEXT NOT NULL DEFAULT '',
    username    TEXT NOT NULL DEFAULT '',
    public_key  TEXT NOT NULL DEFAULT '',
    value       BYTEA NOT NULL,
    sealed_with BIGINT NOT NULL DEFAULT 1 CHECK (sealed_with IN (0, 1)),
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    used_at     BIGINT
);
CREATE UNIQUE INDEX secrets_name_idx ON secrets(user_id, COALESCE(session_id, ''), name);
CREATE INDEX secrets_session_idx ON secrets(session_id);

INSERT INTO secrets (id, user_id, session_id, name, kind, value, sealed_with, created_at, updated_at)
SELECT gen_random_uuid()::text, s.user_id, ss.session_id, ss.name, 'vendor', ss.value, 0, ss.created_at, ss.updated_at
FROM session_secrets ss JOIN agent_session s ON s.id = ss.session_id;

DROP TABLE session_secrets;

CREATE TABLE known_hosts (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    host        TEXT NOT NULL,
    key_type    TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, host)
);
