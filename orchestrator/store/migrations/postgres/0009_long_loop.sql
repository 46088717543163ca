-- 0009_long_loop (PostgreSQL): ../0009_long_loop.sql.
ALTER TABLE agent_session ADD COLUMN checks TEXT NOT NULL DEFAULT '[]';
ALTER TABLE agent_node ADD COLUMN generation BIGINT NOT NULL DEFAULT 1 CHECK (generation >= 1);
ALTER TABLE session_log ADD COLUMN ref BIGINT CHECK (ref IS NULL OR ref > 0);
