-- 0010_vfs_nlink (PostgreSQL): ../0010_vfs_nlink.sql, the triggers as
-- PL/pgSQL functions.
ALTER TABLE fs_inode ADD COLUMN nlink BIGINT NOT NULL DEFAULT 0;

UPDATE fs_inode SET nlink = (SELECT COUNT(*) FROM fs_dentry d
  WHERE d.session_id = fs_inode.session_id AND d.ino = fs_inode.ino);

CREATE FUNCTION fs_dentry_nlink() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE fs_inode SET nlink = nlink - 1 WHERE session_id = OLD.session_id AND ino = OLD.ino;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    UPDATE fs_inode SET nlink = nlink + 1 WHERE session_id = NEW.session_id AND ino = NEW.ino;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER fs_dentry_nlink_insert AFTER INSERT ON fs_dentry
  FOR EACH ROW EXECUTE FUNCTION fs_dentry_nlink();
CREATE TRIGGER fs_dentry_nlink_delete AFTER DELETE ON fs_dentry
  FOR EACH ROW EXECUTE FUNCTION fs_dentry_nlink();
CREATE TRIGGER fs_dentry_nlink_update AFTER UPDATE OF ino ON fs_dentry
  FOR EACH ROW WHEN (OLD.ino != NEW.ino) EXECUTE FUNCTION fs_dentry_nlink();
