-- 0051_audit_actor (PostgreSQL): ../0051_audit_actor.sql.
ALTER TABLE tool_calls ADD COLUMN actor TEXT NOT NULL DEFAULT '';
CREATE INDEX idx_tool_calls_session_id ON tool_calls(session_id, id);
