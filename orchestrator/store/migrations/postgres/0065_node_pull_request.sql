-- 0065_node_pull_request (PostgreSQL): ../0065_node_pull_request.sql.
ALTER TABLE agent_node ADD COLUMN pull_request TEXT NOT NULL DEFAULT '';
