-- 0051_audit_actor: who made an audited call (orchestrator/store/audit.go).
-- tool_calls.actor is the user who made a call through the user API (the
-- file operations of orchestrator/files: a read, an upload, an edit); ''
-- for an agent's own calls, whose node is node_id. A person's call in the
-- session's shared workspace has node_id '' (GET /sessions/{id}/audit lists
-- those with every node's); through a node's files, that node.
ALTER TABLE tool_calls ADD COLUMN actor TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_tool_calls_session_id ON tool_calls(session_id, id);
