-- 0060_approval_scope (PostgreSQL): ../0060_approval_scope.sql.
ALTER TABLE approvals ADD COLUMN scope TEXT NOT NULL DEFAULT '';
