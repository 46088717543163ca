-- 0005_node_started: when a node's agent first ran. A node whose agent has
-- run before is restarted, not started: its container gets no FILEPATH_TASK
-- (the task was its first job, done already) but a system message saying it
-- resumes (runner.ResumeMessage). Unix milliseconds; NULL: never ran.
ALTER TABLE agent_node ADD COLUMN started_at INTEGER;

-- Nodes that ran before this migration: a relay cursor is only ever set for
-- a node whose container was created.
UPDATE agent_node SET started_at = updated_at WHERE log_cursor != '';
