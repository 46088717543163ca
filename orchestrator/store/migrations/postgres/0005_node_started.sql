-- 0005_node_started (PostgreSQL): ../0005_node_started.sql.
ALTER TABLE agent_node ADD COLUMN started_at BIGINT;
UPDATE agent_node SET started_at = updated_at WHERE log_cursor != '';
