-- 0013_vfs_lazy_fork: forks in O(1) (orchestrator/vfs/doc.go, "Forks").
--
-- A fork made from now on copies no metadata rows. Its frozen fork point B
-- is a view: B's own rows are only what the origin has changed or removed
-- since the fork (saved by the triggers below before the change), and every
-- other row is read in the origin: inodes below base_next_ino, names with an
-- id up to max_dentry. The fork C copies a directory's names and their
-- inodes from that view the first time it uses the directory (fs_fork_dir
-- lists the directories it has), like an overlay's copy-up, and every query
-- of the VFS then reads C's own rows as before. Forks made before this
-- migration keep their full copies (lazy = 0).
--
-- The triggers list the columns of fs_inode, fs_dentry and fs_symlink: a
-- migration that adds a column to one of them must add it here too.

ALTER TABLE fs_fork ADD COLUMN lazy INTEGER NOT NULL DEFAULT 0;       -- base: a view; fork: has directories not yet copied
ALTER TABLE fs_fork ADD COLUMN max_dentry INTEGER NOT NULL DEFAULT 0; -- base: the origin's names with an id up to this are in the view

-- A base's saved names: fs_dentry rows of its origin as they were at the
-- fork, keyed by their id there.
CREATE TABLE fs_fork_dentry (
  ws TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  orig_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  parent_ino INTEGER NOT NULL,
  ino INTEGER NOT NULL,
  PRIMARY KEY (ws, orig_id)
) WITHOUT ROWID;
CREATE INDEX fs_fork_dentry_dir_idx ON fs_fork_dentry(ws, parent_ino);

-- The directories a lazy fork has copied from its base.
CREATE TABLE fs_fork_dir (
  ws TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino INTEGER NOT NULL,
  PRIMARY KEY (ws, ino)
) WITHOUT ROWID;

-- Save-before-change into every lazy base of the workspace. A row is saved
-- once: the first change after the fork sees it as it was at the fork.
CREATE TRIGGER fs_inode_fork_update BEFORE UPDATE ON fs_inode
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns,
                       created_ns, is_readonly, sha256, data_gen, nlink)
  SELECT f.ws, OLD.ino, OLD.mode, OLD.uid, OLD.gid, OLD.size, OLD.atime, OLD.mtime, OLD.ctime, OLD.atime_ns, OLD.mtime_ns, OLD.ctime_ns,
         OLD.created_ns, OLD.is_readonly, OLD.sha256, OLD.data_gen, OLD.nlink
  FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino);
END;

CREATE TRIGGER fs_inode_fork_delete BEFORE DELETE ON fs_inode
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns,
                       created_ns, is_readonly, sha256, data_gen, nlink)
  SELECT f.ws, OLD.ino, OLD.mode, OLD.uid, OLD.gid, OLD.size, OLD.atime, OLD.mtime, OLD.ctime, OLD.atime_ns, OLD.mtime_ns, OLD.ctime_ns,
         OLD.created_ns, OLD.is_readonly, OLD.sha256, OLD.data_gen, OLD.nlink
  FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino);
END;

CREATE TRIGGER fs_dentry_fork_update BEFORE UPDATE ON fs_dentry
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_fork_dentry(ws, orig_id, name, parent_ino, ino)
  SELECT f.ws, OLD.id, OLD.name, OLD.parent_ino, OLD.ino FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.id <= f.max_dentry
    AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry s WHERE s.ws = f.ws AND s.orig_id = OLD.id);
END;

CREATE TRIGGER fs_dentry_fork_delete BEFORE DELETE ON fs_dentry
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_fork_dentry(ws, orig_id, name, parent_ino, ino)
  SELECT f.ws, OLD.id, OLD.name, OLD.parent_ino, OLD.ino FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.id <= f.max_dentry
    AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry s WHERE s.ws = f.ws AND s.orig_id = OLD.id);
END;

CREATE TRIGGER fs_symlink_fork_update BEFORE UPDATE ON fs_symlink
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_symlink(session_id, ino, target)
  SELECT f.ws, OLD.ino, OLD.target FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_symlink s WHERE s.session_id = f.ws AND s.ino = OLD.ino);
END;

CREATE TRIGGER fs_symlink_fork_delete BEFORE DELETE ON fs_symlink
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1)
BEGIN
  INSERT INTO fs_symlink(session_id, ino, target)
  SELECT f.ws, OLD.ino, OLD.target FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_symlink s WHERE s.session_id = f.ws AND s.ino = OLD.ino);
END;
