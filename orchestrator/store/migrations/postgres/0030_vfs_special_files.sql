-- 0030_vfs_special_files (PostgreSQL): ../0030_vfs_special_files.sql, the
-- triggers as PL/pgSQL functions; the backfill is the same SQL.

DROP TRIGGER fs_inode_fork_update ON fs_inode;
DROP TRIGGER fs_inode_fork_delete ON fs_inode;

ALTER TABLE fs_inode ADD COLUMN rdev BIGINT NOT NULL DEFAULT 0;

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

CREATE FUNCTION fs_dentry_dirlink() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE fs_inode SET nlink = nlink - 1 WHERE session_id = OLD.session_id AND ino = OLD.parent_ino
      AND EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id = OLD.session_id AND c.ino = OLD.ino AND c.mode & 61440 = 16384);
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    UPDATE fs_inode SET nlink = nlink + 1 WHERE session_id = NEW.session_id AND ino = NEW.parent_ino
      AND EXISTS (SELECT 1 FROM fs_inode c WHERE c.session_id = NEW.session_id AND c.ino = NEW.ino AND c.mode & 61440 = 16384);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER fs_dentry_dirlink_insert AFTER INSERT ON fs_dentry
  FOR EACH ROW EXECUTE FUNCTION fs_dentry_dirlink();
CREATE TRIGGER fs_dentry_dirlink_delete AFTER DELETE ON fs_dentry
  FOR EACH ROW EXECUTE FUNCTION fs_dentry_dirlink();
CREATE TRIGGER fs_dentry_dirlink_update AFTER UPDATE OF parent_ino, ino ON fs_dentry
  FOR EACH ROW WHEN (OLD.parent_ino != NEW.parent_ino OR OLD.ino != NEW.ino) EXECUTE FUNCTION fs_dentry_dirlink();

CREATE OR REPLACE FUNCTION fs_inode_fork_save() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1) THEN
    INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns,
                         created_ns, is_readonly, sha256, data_gen, nlink, rdev)
    SELECT f.ws, OLD.ino, OLD.mode, OLD.uid, OLD.gid, OLD.size, OLD.atime, OLD.mtime, OLD.ctime, OLD.atime_ns, OLD.mtime_ns, OLD.ctime_ns,
           OLD.created_ns, OLD.is_readonly, OLD.sha256, OLD.data_gen, OLD.nlink, OLD.rdev
    FROM fs_fork f
    WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
      AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino);
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fs_inode_fork_update BEFORE UPDATE ON fs_inode
  FOR EACH ROW EXECUTE FUNCTION fs_inode_fork_save();
CREATE TRIGGER fs_inode_fork_delete BEFORE DELETE ON fs_inode
  FOR EACH ROW EXECUTE FUNCTION fs_inode_fork_save();
