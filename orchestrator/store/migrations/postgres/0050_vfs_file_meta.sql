-- 0050_vfs_file_meta (PostgreSQL): ../0050_vfs_file_meta.sql, the triggers
-- as PL/pgSQL functions.
CREATE TABLE fs_file_meta (
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino BIGINT NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  node_id TEXT NOT NULL DEFAULT '',
  mime_type TEXT,
  mime_gen BIGINT,
  PRIMARY KEY (session_id, ino)
);

CREATE FUNCTION fs_file_meta_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM fs_file_meta WHERE session_id = OLD.session_id AND ino = OLD.ino;
  RETURN NULL;
END $$;
CREATE TRIGGER fs_file_meta_inode_delete AFTER DELETE ON fs_inode
  FOR EACH ROW EXECUTE FUNCTION fs_file_meta_forget();
CREATE TRIGGER fs_file_meta_inode_tombstone AFTER UPDATE OF mode ON fs_inode
  FOR EACH ROW WHEN (NEW.mode = 0) EXECUTE FUNCTION fs_file_meta_forget();
