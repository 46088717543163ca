-- 0001_core: users and their credentials, agent sessions, the node tree and
-- the per-session ordered log. Times are unix milliseconds (INTEGER).
-- Never edit this file after release: add a new numbered migration instead.

CREATE TABLE users (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    is_admin   INTEGER NOT NULL DEFAULT 0 CHECK (is_admin IN (0, 1)),
    created_at INTEGER NOT NULL
);

-- API keys are stored as the sha256 of the key; the key itself is shown once.
-- A key with node_id set belongs to one agent container and reaches only that
-- node's resources (DESIGN invariant 9); it dies with the node. (SQLite
-- resolves the forward references to agent_session/agent_node at use time.)
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id   TEXT REFERENCES agent_session(id) ON DELETE CASCADE,
    node_id      TEXT REFERENCES agent_node(id) ON DELETE CASCADE,
    name         TEXT NOT NULL DEFAULT '',
    hash         TEXT NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
);
CREATE INDEX api_keys_user_id_idx ON api_keys(user_id);
CREATE INDEX api_keys_node_id_idx ON api_keys(node_id);

CREATE TABLE login_tokens (
    hash       TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
CREATE INDEX login_tokens_user_id_idx ON login_tokens(user_id);

CREATE TABLE web_sessions (
    hash       TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
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
    started_at     INTEGER,
    last_billed_at INTEGER,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX agent_session_user_id_idx ON agent_session(user_id);
CREATE INDEX agent_session_status_idx ON agent_session(status);

-- parent_id references the same table so that a subtree can never outlive its
-- parent; the store still deletes subtrees explicitly to report removed ids.
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
    context_pct  REAL CHECK (context_pct IS NULL OR (context_pct >= 0 AND context_pct <= 1)),
    config       TEXT NOT NULL DEFAULT '{}',
    container_id TEXT NOT NULL DEFAULT '',
    sort_order   INTEGER NOT NULL DEFAULT 0,
    tokens       INTEGER NOT NULL DEFAULT 0,
    log_cursor   TEXT NOT NULL DEFAULT '',
    exit_code    INTEGER,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX agent_node_session_id_idx ON agent_node(session_id);
CREATE INDEX agent_node_parent_id_idx ON agent_node(parent_id);
CREATE INDEX agent_node_status_idx ON agent_node(status);

-- One ordered log per session (DESIGN invariant 2): seq is assigned by the
-- store, strictly increasing within a session. payload is a JSON object.
CREATE TABLE session_log (
    session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq > 0),
    node_id    TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL CHECK (kind IN ('event', 'input', 'node', 'file', 'error')),
    payload    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE INDEX session_log_node_idx ON session_log(session_id, node_id, seq);
