-- 0020_session_base (PostgreSQL): ../0020_session_base.sql.
ALTER TABLE agent_session ADD COLUMN base_commit TEXT;
