-- 0011_session_secrets (PostgreSQL): ../0011_session_secrets.sql.
CREATE TABLE session_secrets (
    session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, name)
);
