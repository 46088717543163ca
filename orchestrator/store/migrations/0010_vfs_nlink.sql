-- 0010_vfs_nlink: the link count of an inode as a column of fs_inode,
-- kept by triggers on fs_dentry, so that a lookup or stat reads one row
-- instead of counting the inode's names each time.
--
-- fs_inode.nlink   the number of fs_dentry rows naming the inode (0 for the
--                  root, which has none, and for an open orphan); the VFS
--                  reports the root as 1, as before. The entry type stays
--                  in fs_inode.mode (agentfs), which a lookup already reads.
ALTER TABLE fs_inode ADD COLUMN nlink INTEGER NOT NULL DEFAULT 0;

UPDATE fs_inode SET nlink = (SELECT COUNT(*) FROM fs_dentry d
  WHERE d.session_id = fs_inode.session_id AND d.ino = fs_inode.ino);

CREATE TRIGGER fs_dentry_nlink_insert AFTER INSERT ON fs_dentry
BEGIN
  UPDATE fs_inode SET nlink = nlink + 1 WHERE session_id = NEW.session_id AND ino = NEW.ino;
END;

CREATE TRIGGER fs_dentry_nlink_delete AFTER DELETE ON fs_dentry
BEGIN
  UPDATE fs_inode SET nlink = nlink - 1 WHERE session_id = OLD.session_id AND ino = OLD.ino;
END;

CREATE TRIGGER fs_dentry_nlink_update AFTER UPDATE OF ino ON fs_dentry
WHEN OLD.ino != NEW.ino
BEGIN
  UPDATE fs_inode SET nlink = nlink - 1 WHERE session_id = OLD.session_id AND ino = OLD.ino;
  UPDATE fs_inode SET nlink = nlink + 1 WHERE session_id = NEW.session_id AND ino = NEW.ino;
END;
