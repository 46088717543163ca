-- 0008_collab: agents working together (issue 13): memories, approvals, and
-- the per-node audit of tool calls. Times are unix milliseconds unless said.

-- memories are the learnings agents keep per user and repository: the
-- agentfs kv_store (agentfs-spec.md) with a scope. (user_id, repo) selects
-- one store; key and value are kv_store's key and value (value holds plain
-- text here, not JSON); created_at and updated_at are kv_store's, in
-- milliseconds; setting a key is kv_store's upsert (ON CONFLICT DO UPDATE
-- value and updated_at, created_at kept). repo is the session's git URL,
-- normalised (store.NormalizeRepo); '' is the user's "no repository" scope.
-- node_id and session_id name who stored it last (no foreign keys: a memory
-- outlives its session).
CREATE TABLE memories (
    id         TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    repo       TEXT NOT NULL DEFAULT '',
    key        TEXT NOT NULL,
    value      TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    node_id    TEXT NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    UNIQUE (user_id, repo, key)
);
CREATE INDEX memories_scope_idx ON memories(user_id, repo, updated_at);

-- approvals are agents' requests for permission, waiting in one inbox per
-- session. A request is answered once (approved or denied, by a user, by the
-- node's policy, or by its timeout at expires_at). request_id is the
-- client's own id of a request: a POST repeated with it returns the first.
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
    always      INTEGER NOT NULL DEFAULT 0 CHECK (always IN (0, 1)),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    answered_at INTEGER
);
CREATE UNIQUE INDEX approvals_request_idx ON approvals(node_id, request_id) WHERE request_id != '';
CREATE INDEX approvals_session_idx ON approvals(session_id, status, created_at);
CREATE INDEX approvals_pending_idx ON approvals(expires_at) WHERE status = 'pending';

-- tool_calls (0002, agentfs) becomes the audit of each node: every tool and
-- command an agent reported (a start paired with its done or error) and
-- every agent-API call. started_at and completed_at stay agentfs's unix
-- seconds (duration_ms = their difference * 1000, agentfs's rule);
-- started_ms and completed_ms keep the milliseconds. source is tool,
-- command or api ('' : a row recorded without one); seq is the log record
-- that ended the call (tool and command rows).
ALTER TABLE tool_calls ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_calls ADD COLUMN seq INTEGER;
ALTER TABLE tool_calls ADD COLUMN started_ms INTEGER;
ALTER TABLE tool_calls ADD COLUMN completed_ms INTEGER;
CREATE INDEX idx_tool_calls_node ON tool_calls(session_id, node_id, id);
