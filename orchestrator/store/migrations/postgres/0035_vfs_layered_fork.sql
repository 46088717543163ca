-- 0035_vfs_layered_fork (PostgreSQL): ../0035_vfs_layered_fork.sql.
-- fs_fork."full" is quoted: FULL is a reserved word here.
ALTER TABLE fs_fork ADD COLUMN layered BIGINT NOT NULL DEFAULT 0;
ALTER TABLE fs_fork ADD COLUMN "full" BIGINT NOT NULL DEFAULT 0;

CREATE INDEX fs_fork_dentry_name_idx ON fs_fork_dentry(ws, parent_ino, name);
CREATE INDEX fs_fork_dentry_ino_idx ON fs_fork_dentry(ws, ino);
DROP INDEX fs_fork_dentry_dir_idx;

INSERT INTO fs_dentry(session_id, name, parent_ino, ino)
SELECT f.ws, v.name, v.parent_ino, 0
FROM fs_fork f JOIN fs_fork b ON b.ws = f.parent_ws JOIN fs_fork_dir c ON c.ws = f.ws
JOIN (SELECT s.ws AS base, s.parent_ino, s.name FROM fs_fork_dentry s
      UNION ALL
      SELECT b2.ws, d.parent_ino, d.name FROM fs_fork b2 JOIN fs_dentry d ON d.session_id = b2.parent_ws AND d.id <= b2.max_dentry
      WHERE b2.kind = 'base' AND b2.lazy = 1
        AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry x WHERE x.ws = b2.ws AND x.orig_id = d.id)) v
  ON v.base = b.ws AND v.parent_ino = c.ino
WHERE f.kind = 'fork' AND f.lazy = 1
  AND NOT EXISTS (SELECT 1 FROM fs_dentry o WHERE o.session_id = f.ws AND o.parent_ino = v.parent_ino AND o.name = v.name);

UPDATE fs_fork SET layered = 1, lazy = 0 WHERE kind = 'fork' AND lazy = 1;
DELETE FROM fs_fork_dir;
