-- 0007_system_records (PostgreSQL): ../0007_system_records.sql. Here a
-- CHECK constraint is replaced in place; SQLite rebuilds the table.
ALTER TABLE session_log DROP CONSTRAINT session_log_kind_check;
ALTER TABLE session_log ADD CONSTRAINT session_log_kind_check
    CHECK (kind IN ('event', 'input', 'node', 'file', 'error', 'system'));
