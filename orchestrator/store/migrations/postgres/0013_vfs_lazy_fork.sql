-- 0013_vfs_lazy_fork (PostgreSQL): ../0013_vfs_lazy_fork.sql. The functions
-- list the columns of fs_inode, fs_dentry and fs_symlink: a migration that
-- adds a column to one of them must add it here too.

ALTER TABLE fs_fork ADD COLUMN lazy BIGINT NOT NULL DEFAULT 0;
ALTER TABLE fs_fork ADD COLUMN max_dentry BIGINT NOT NULL DEFAULT 0;

CREATE TABLE fs_fork_dentry (
  ws TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  orig_id BIGINT NOT NULL,
  name TEXT NOT NULL,
  parent_ino BIGINT NOT NULL,
  ino BIGINT NOT NULL,
  PRIMARY KEY (ws, orig_id)
);
CREATE INDEX fs_fork_dentry_dir_idx ON fs_fork_dentry(ws, parent_ino);

CREATE TABLE fs_fork_dir (
  ws TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino BIGINT NOT NULL,
  PRIMARY KEY (ws, ino)
);

CREATE FUNCTION fs_inode_fork_save() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1) THEN
    INSERT INTO fs_inode(session_id, ino, mode, uid, gid, size, atime, mtime, ctime, atime_ns, mtime_ns, ctime_ns,
                         created_ns, is_readonly, sha256, data_gen, nlink)
    SELECT f.ws, OLD.ino, OLD.mode, OLD.uid, OLD.gid, OLD.size, OLD.atime, OLD.mtime, OLD.ctime, OLD.atime_ns, OLD.mtime_ns, OLD.ctime_ns,
           OLD.created_ns, OLD.is_readonly, OLD.sha256, OLD.data_gen, OLD.nlink
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

CREATE FUNCTION fs_dentry_fork_save() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1) THEN
    INSERT INTO fs_fork_dentry(ws, orig_id, name, parent_ino, ino)
    SELECT f.ws, OLD.id, OLD.name, OLD.parent_ino, OLD.ino FROM fs_fork f
    WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.id <= f.max_dentry
      AND NOT EXISTS (SELECT 1 FROM fs_fork_dentry s WHERE s.ws = f.ws AND s.orig_id = OLD.id);
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fs_dentry_fork_update BEFORE UPDATE ON fs_dentry
  FOR EACH ROW EXECUTE FUNCTION fs_dentry_fork_save();
CREATE TRIGGER fs_dentry_fork_delete BEFORE DELETE ON fs_dentry
  FOR EACH ROW EXECUTE FUNCTION fs_dentry_fork_save();

CREATE FUNCTION fs_symlink_fork_save() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id AND lazy = 1) THEN
    INSERT INTO fs_symlink(session_id, ino, target)
    SELECT f.ws, OLD.ino, OLD.target FROM fs_fork f
    WHERE f.parent_ws = OLD.session_id AND f.lazy = 1 AND OLD.ino < f.base_next_ino
      AND NOT EXISTS (SELECT 1 FROM fs_symlink s WHERE s.session_id = f.ws AND s.ino = OLD.ino);
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fs_symlink_fork_update BEFORE UPDATE ON fs_symlink
  FOR EACH ROW EXECUTE FUNCTION fs_symlink_fork_save();
CREATE TRIGGER fs_symlink_fork_delete BEFORE DELETE ON fs_symlink
  FOR EACH ROW EXECUTE FUNCTION fs_symlink_fork_save();
