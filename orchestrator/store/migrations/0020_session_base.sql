-- 0020_session_base: the commit a session's repository was cloned at
-- (the runner records it when the clone finishes), the default base of the
-- Changes view (orchestrator/changes). NULL: not cloned, or cloned before
-- this migration.
ALTER TABLE agent_session ADD COLUMN base_commit TEXT;
