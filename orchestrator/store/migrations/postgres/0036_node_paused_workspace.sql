-- 0036_node_paused_workspace (PostgreSQL): ../0036_node_paused_workspace.sql.
ALTER TABLE agent_node ADD COLUMN paused BIGINT NOT NULL DEFAULT 0;
ALTER TABLE agent_node ADD COLUMN status_detail TEXT NOT NULL DEFAULT ''
    CHECK (status_detail IN ('', 'stopped', 'lost'));
ALTER TABLE agent_node ADD COLUMN workspace TEXT NOT NULL DEFAULT 'shared'
    CHECK (workspace IN ('shared', 'fork'));
UPDATE agent_node SET workspace = 'fork'
WHERE id IN (SELECT node_id FROM fs_fork WHERE kind = 'fork' AND node_id IS NOT NULL);
