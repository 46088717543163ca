-- 0001_core (PostgreSQL): the same tables as ../0001_core.sql. Types map
-- SQLite's INTEGER to BIGINT, REAL to DOUBLE PRECISION, BLOB to BYTEA;
-- flags stay integers 0/1 so that both databases hold the same values.
-- api_keys comes after the tables it references (PostgreSQL resolves
-- references when a table is created).

CREATE TABLE users (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    is_admin   BIGINT NOT NULL DEFAULT 0 CHECK (is_admin IN (0, 1)),
    created_at BIGINT NOT NULL
);

CREATE TABLE login_tokens (
    hash       TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at    BIGINT
);
CREATE INDEX login_tokens_user_id_idx ON login_tokens(user_id);

CREATE TABLE web_sessions (
    hash       TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX web_sessions_user_id_idx ON web_sessions(user_id);

CREATE TABLE agent_session (
    id             TEXT PRIMARY KEY,
    user_id        TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    git_repo_url   TEXT,
    status         TEXT NOT NULL DEFAULT 'draft'
                   CHECK (status IN ('draft', 'running', 'paused', 'stopped', 'error')),
    root_node_id   TEXT,
    started_at     BIGINT,
    last_billed_at BIGINT,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
CREATE INDEX agent_session_user_id_idx ON agent_session(user_id);
CREATE INDEX agent_session_status_idx ON agent_session(status);

CREATE TABLE agent_node (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
    parent_id    TEXT REFERENCES agent_node(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    agent_type   TEXT NOT NULL,
    model        TEXT NOT NULL,
    image        TEXT NOT NULL DEFAULT '',
    status       TEXT NOT NULL DEFAULT 'idle'
                 CHECK (status IN ('idle', 'thinking', 'running', 'done', 'error')),
    context_pct  DOUBLE PRECISION CHECK (context_pct IS NULL OR (context_pct >= 0 AND context_pct <= 1)),
    config       TEXT NOT NULL DEFAULT '{}',
    container_id TEXT NOT NULL DEFAULT '',
    sort_order   BIGINT NOT NULL DEFAULT 0,
    tokens       BIGINT NOT NULL DEFAULT 0,
    log_cursor   TEXT NOT NULL DEFAULT '',
    exit_code    BIGINT,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX agent_node_session_id_idx ON agent_node(session_id);
CREATE INDEX agent_node_parent_id_idx ON agent_node(parent_id);
CREATE INDEX agent_node_status_idx ON agent_node(status);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id   TEXT REFERENCES agent_session(id) ON DELETE CASCADE,
    node_id      TEXT REFERENCES agent_node(id) ON DELETE CASCADE,
    name         TEXT NOT NULL DEFAULT '',
    hash         TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT
);
CREATE INDEX api_keys_user_id_idx ON api_keys(user_id);
CREATE INDEX api_keys_node_id_idx ON api_keys(node_id);

CREATE TABLE session_log (
    session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL CHECK (seq > 0),
    node_id    TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL CONSTRAINT session_log_kind_check CHECK (kind IN ('event', 'input', 'node', 'file', 'error')),
    payload    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX session_log_node_idx ON session_log(session_id, node_id, seq);
