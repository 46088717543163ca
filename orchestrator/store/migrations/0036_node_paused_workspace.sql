-- 0036_node_paused_workspace: what a node shows of itself besides its agent's
-- state (issue 27). SQLite cannot change status's CHECK in place, and
-- agent_node cannot be rebuilt here (dropping it would cascade to every table
-- that references it), so filepath's own states are columns beside it.
--
-- paused: its container is frozen (signal pause) until a resume or stop; the
-- node shows status "paused" meanwhile and keeps its agent's status for after.
-- status_detail: an end filepath found rather than one the agent reported:
-- 'stopped' (a person stopped it before it said done; status is 'idle') or
-- 'lost' (its container vanished; status is 'error'). The node shows it as its
-- status; any later status clears it.
-- workspace: 'fork' for a node that works on a copy-on-write fork of its
-- parent's workspace (fs_fork.node_id names it), 'shared' otherwise.
ALTER TABLE agent_node ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_node ADD COLUMN status_detail TEXT NOT NULL DEFAULT ''
    CHECK (status_detail IN ('', 'stopped', 'lost'));
ALTER TABLE agent_node ADD COLUMN workspace TEXT NOT NULL DEFAULT 'shared'
    CHECK (workspace IN ('shared', 'fork'));
UPDATE agent_node SET workspace = 'fork'
WHERE id IN (SELECT node_id FROM fs_fork WHERE kind = 'fork' AND node_id IS NOT NULL);
