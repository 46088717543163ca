-- 0030_vfs_special_files: FIFOs, sockets and device nodes; directory link
-- counts as POSIX has them (orchestrator/vfs/doc.go).
--
-- fs_inode.rdev   the device number of a character or block device
--                 (st_rdev, as the kernel encodes it); 0 for every other
--                 inode. The type of a FIFO, socket or device stays in
--                 fs_inode.mode, as for the others (agentfs).
--
-- fs_inode.nlink of a directory counts, besides the names of the
-- directory (one, none for the root), the ".." of each subdirectory: the
-- triggers below keep it as directories are made, removed and moved. The
-- VFS adds the directory's own "." (and the root's ".." ) when it reports
-- it, so that a directory shows 2 plus its subdirectories; the column stays
-- 0 exactly when nothing names the inode, which is when it may go.
--
-- The save-before-change triggers of 0013 list fs_inode's columns: they are
-- made again here with rdev. They are dropped first, so that the backfill
-- below changes no lazy fork point's view (every view is backfilled itself).

DROP TRIGGER fs_inode_fork_update;
DROP TRIGGER fs_inode_fork_delete;

ALTER TABLE fs_inode ADD COLUMN rdev INTEGER NOT NULL DEFAULT 0;

-- Backfill: a directory's subdirectories, in each workspace as its reads
-- see them. A workspace's own names, except where it reads another's: a
-- lazy fork point (fs_fork kind 'base', lazy 1) reads its saved names and
-- its origin's (up to max_dentry, less the saved ones); a lazy fork (kind
-- 'fork', lazy 1) reads, for a directory it has not copied (below
-- base_next_ino, not in fs_fork_dir), its fork point's. A directory's row
-- there is the view's own (copied from it), so it takes the view's count.
CREATE TEMP TABLE nlink_view_dirs AS
  SELECT b.ws AS ws, d.parent_ino AS dir, COUNT(*) AS n
  FROM fs_fork b
  JOIN (SELECT ws, parent_ino, ino FROM fs_fork_dentry
        UNION ALL
        SELECT f.ws, o.parent_ino, o.ino FROM fs_fork f JOIN fs_dentry o ON o.session_id = f.parent_ws AND o.id <= f.max_dentry
        WHERE f.kind = 'base' AND f.lazy = 1
          AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry s WHERE s.ws = f.ws AND s.orig_id = o.id)) d ON d.ws = b.ws
  WHERE b.kind = 'base' AND b.lazy = 1
    AND EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id IN (b.ws, b.parent_ws) AND c.ino = d.ino AND c.mode & 61440 = 16384)
  GROUP BY b.ws, d.parent_ino;

UPDATE fs_inode SET nlink = nlink + (
    SELECT COUNT(*) FROM fs_dentry d JOIN fs_inode c ON c.session_id = d.session_id AND c.ino = d.ino
    WHERE d.session_id = fs_inode.session_id AND d.parent_ino = fs_inode.ino AND c.mode & 61440 = 16384)
  WHERE mode & 61440 = 16384
    AND session_id NOT IN (SELECT ws FROM fs_fork WHERE kind = 'base' AND lazy = 1)
    AND NOT EXISTS (SELECT 1 FROM fs_fork f WHERE f.ws = fs_inode.session_id AND f.kind = 'fork' AND f.lazy = 1
                    AND fs_inode.ino < f.base_next_ino
                    AND NOT EXISTS (SELECT 1 FROM fs_fork_dir c WHERE c.ws = f.ws AND c.ino = fs_inode.ino));

-- a lazy fork point's saved rows, and the origin's rows it reads: the
-- origin's rows were backfilled above from its own names, which are the
-- view's for every directory whose row the fork point has not saved (a
-- change of a directory's names changes its row: its times)
UPDATE fs_inode SET nlink = nlink + COALESCE((SELECT n FROM nlink_view_dirs v WHERE v.ws = fs_inode.session_id AND v.dir = fs_inode.ino), 0)
  WHERE mode & 61440 = 16384
    AND session_id IN (SELECT ws FROM fs_fork WHERE kind = 'base' AND lazy = 1);

UPDATE fs_inode SET nlink = nlink + COALESCE((SELECT v.n FROM fs_fork f JOIN nlink_view_dirs v ON v.ws = f.parent_ws
                                              WHERE f.ws = fs_inode.session_id AND v.dir = fs_inode.ino), 0)
  WHERE mode & 61440 = 16384
    AND EXISTS (SELECT 1 FROM fs_fork f WHERE f.ws = fs_inode.session_id AND f.kind = 'fork' AND f.lazy = 1
                AND fs_inode.ino < f.base_next_ino
                AND NOT EXISTS (SELECT 1 FROM fs_fork_dir c WHERE c.ws = f.ws AND c.ino = fs_inode.ino));

DROP TABLE nlink_view_dirs;

-- A name of a directory added, removed or moved: its parent's count. The
-- directory's inode exists before its name is added (a copy that adds the
-- names first, a lazy fork's copy-up, counts them in the rows it copies)
-- and goes after its name is removed.
CREATE TRIGGER fs_dentry_dirlink_insert AFTER INSERT ON fs_dentry
WHEN EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id = NEW.session_id AND c.ino = NEW.ino AND c.mode & 61440 = 16384)
BEGIN
  UPDATE fs_inode SET nlink = nlink + 1 WHERE session_id = NEW.session_id AND ino = NEW.parent_ino;
END;

CREATE TRIGGER fs_dentry_dirlink_delete AFTER DELETE ON fs_dentry
WHEN EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id = OLD.session_id AND c.ino = OLD.ino AND c.mode & 61440 = 16384)
BEGIN
  UPDATE fs_inode SET nlink = nlink - 1 WHERE session_id = OLD.session_id AND ino = OLD.parent_ino;
END;

CREATE TRIGGER fs_dentry_dirlink_update AFTER UPDATE OF parent_ino, ino ON fs_dentry
WHEN OLD.parent_ino != NEW.parent_ino OR OLD.ino != NEW.ino
BEGIN
  UPDATE fs_inode SET nlink = nlink - 1 WHERE session_id = OLD.session_id AND ino = OLD.parent_ino
    AND EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id = OLD.session_id AND c.ino = OLD.ino AND c.mode & 61440 = 16384);
  UPDATE fs_inode SET nlink = nlink + 1 WHERE session_id = NEW.session_id AND ino = NEW.parent_ino
    AND EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id = NEW.session_id AND c.ino = NEW.ino AND c.mode & 61440 = 16384);
END;

CREATE TRIGGER fs_inode_fork_update BEFORE UPDATE ON fs_inode
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns,
                       created_ns, is_readonly, sha256, data_gen, nlink, rdev)
  SELECT f.ws, OLD.ino, OLD.mode, OLD.uid, OLD.gid, OLD.size, OLD.atime, OLD.mtime, OLD.ctime, OLD.atime_ns, OLD.mtime_ns, OLD.ctime_ns,
         OLD.created_ns, OLD.is_readonly, OLD.sha256, OLD.data_gen, OLD.nlink, OLD.rdev
  FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino);
END;

CREATE TRIGGER fs_inode_fork_delete BEFORE DELETE ON fs_inode
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns,
                       created_ns, is_readonly, sha256, data_gen, nlink, rdev)
  SELECT f.ws, OLD.ino, OLD.mode, OLD.uid, OLD.gid, OLD.size, OLD.atime, OLD.mtime, OLD.ctime, OLD.atime_ns, OLD.mtime_ns, OLD.ctime_ns,
         OLD.created_ns, OLD.is_readonly, OLD.sha256, OLD.data_gen, OLD.nlink, OLD.rdev
  FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino);
END;
