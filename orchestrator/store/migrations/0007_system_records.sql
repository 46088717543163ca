-- 0007_system_records: a session log record may be of kind 'system': a block
-- filepath itself adds to a node's chat (a health check's result, memories
-- given to an agent at start, a continuation after a handoff, an approval
-- request and its answer). SQLite cannot change a CHECK constraint in place,
-- so the table is rebuilt with the same rows, keys and index.
CREATE TABLE session_log_new (
    session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq > 0),
    node_id    TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL CHECK (kind IN ('event', 'input', 'node', 'file', 'error', 'system')),
    payload    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
);
INSERT INTO session_log_new (session_id, seq, node_id, kind, payload, created_at)
    SELECT session_id, seq, node_id, kind, payload, created_at FROM session_log;
DROP TABLE session_log;
ALTER TABLE session_log_new RENAME TO session_log;
CREATE INDEX session_log_node_idx ON session_log(session_id, node_id, seq);
