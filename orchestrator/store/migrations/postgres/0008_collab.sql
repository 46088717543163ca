-- 0008_collab (PostgreSQL): ../0008_collab.sql.
CREATE TABLE memories (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    repo       TEXT NOT NULL DEFAULT '',
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    node_id    TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (user_id, repo, key)
);
CREATE INDEX memories_scope_idx ON memories(user_id, repo, updated_at);

CREATE TABLE approvals (
    id          TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
    node_id     TEXT NOT NULL REFERENCES agent_node(id) ON DELETE CASCADE,
    request_id  TEXT NOT NULL DEFAULT '',
    action      TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied')),
    answered_by TEXT NOT NULL DEFAULT '',
    always      BIGINT NOT NULL DEFAULT 0 CHECK (always IN (0, 1)),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    answered_at BIGINT
);
CREATE UNIQUE INDEX approvals_request_idx ON approvals(node_id, request_id) WHERE request_id != '';
CREATE INDEX approvals_session_idx ON approvals(session_id, status, created_at);
CREATE INDEX approvals_pending_idx ON approvals(expires_at) WHERE status = 'pending';

ALTER TABLE tool_calls ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN seq BIGINT;
ALTER TABLE tool_calls ADD COLUMN started_ms BIGINT;
ALTER TABLE tool_calls ADD COLUMN completed_ms BIGINT;
CREATE INDEX idx_tool_calls_node ON tool_calls(session_id, node_id, id);
