-- 0009_long_loop: what lets a node work across agent sessions.
--
-- agent_session.checks: the session's health checks, a JSON array of
-- {"command", "timeout"} run in the workspace before every agent session of
-- its nodes ('[]': detected from the repository instead).
-- agent_node.generation: the node's agent session number; a handoff starts
-- generation N+1 in the same node and workspace.
-- session_log.ref: for a commit event, the seq of the tool or command record
-- of the same node during which HEAD moved (NULL: none known).
ALTER TABLE agent_session ADD COLUMN checks TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agent_node ADD COLUMN generation INTEGER NOT NULL DEFAULT 1 CHECK (generation >= 1);
ALTER TABLE session_log ADD COLUMN ref INTEGER CHECK (ref IS NULL OR ref > 0);
