-- 0035_vfs_layered_fork: forks that never copy (orchestrator/vfs/doc.go, "Forks").
--
-- A fork made from now on is layered (fs_fork.layered = 1): its own rows
-- are only what it changed, and every read falls through to its frozen
-- base's view (migration 0013) where the fork has no row of its own, like
-- an overlay filesystem. What it removed of its base is marked in its own
-- rows:
--
--   - a whiteout is an fs_dentry row with ino 0: the name (parent_ino,
--     name) is gone in the fork, whatever its base has there. A whiteout is
--     keyed by its directory's inode, not by a path, so renaming a
--     directory moves one name and leaves one whiteout: its contents are
--     keyed by its inode number, which does not change.
--   - a tombstone is an fs_inode row with mode 0: the inode is gone in the
--     fork (no name left, not open), whatever its base has.
--
-- An inode the fork changes is first copied up, unchanged, into its own
-- rows (one row); names are never copied.
--
-- fs_fork.full = 1 marks a base whose saved rows (fs_fork_dentry, and its
-- fs_inode and fs_symlink rows) hold its whole view: the compaction that
-- bounds the depth of forks of forks (VFS.compact) filled them, so reads
-- stop there.
ALTER TABLE fs_fork ADD COLUMN layered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE fs_fork ADD COLUMN full INTEGER NOT NULL DEFAULT 0;

-- A layered read looks a name up in a base's saved names, and finds the
-- names of an inode there.
CREATE INDEX fs_fork_dentry_name_idx ON fs_fork_dentry(ws, parent_ino, name);
CREATE INDEX fs_fork_dentry_ino_idx ON fs_fork_dentry(ws, ino);
DROP INDEX fs_fork_dentry_dir_idx;

-- Forks of migration 0013 (lazy = 1) copied each directory they used whole
-- (fs_fork_dir) and read the others in their base's view: they become
-- layered forks by a whiteout for every name of a copied directory that
-- the view has and the fork no longer has. Their base's origin was whole
-- when they were made (0013 copied it first), so the view is the base's
-- saved names over its origin's.
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
