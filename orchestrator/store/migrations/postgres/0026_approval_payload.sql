-- 0026_approval_payload (PostgreSQL): ../0026_approval_payload.sql.
ALTER TABLE approvals ADD COLUMN payload TEXT NOT NULL DEFAULT '';
