-- 0050_vfs_file_meta: what the session filesystem knows of a file besides
-- its inode (orchestrator/vfs/filemeta.go): its MIME type, detected from
-- its content, and where its bytes came from.
--
--   source      upload (a person's: the user API, an upload), created (an
--               agent's: its mount, its tools, its key), derived (made from
--               another file: a copy, a format tool's output)
--   node_id     the node that last wrote it ('' : a person)
--   mime_type   detected from the first bytes (magic numbers, not the name)
--   mime_gen    the inode's data_gen the type was detected at: a type whose
--               gen is not the inode's is stale and detected again on read
--
-- Keyed by inode, like fs_inode: a rename keeps it, a hard link shares it.
-- A row goes with its inode (the trigger below), and with its workspace.
-- A fork's own rows are its own: a file it inherited has none until it is
-- written or its type is read (the fork's reads fall back to the row of
-- the workspace it was forked from for source and node_id; the type is
-- detected again).
CREATE TABLE fs_file_meta (
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino INTEGER NOT NULL,
  source TEXT NOT NULL DEFAULT '',
  node_id TEXT NOT NULL DEFAULT '',
  mime_type TEXT,
  mime_gen INTEGER,
  PRIMARY KEY (session_id, ino)
);

CREATE TRIGGER fs_file_meta_inode_delete AFTER DELETE ON fs_inode
BEGIN
  DELETE FROM fs_file_meta WHERE session_id = OLD.session_id AND ino = OLD.ino;
END;

-- a layered fork's tombstone (mode 0) ends its own inode the same way
CREATE TRIGGER fs_file_meta_inode_tombstone AFTER UPDATE OF mode ON fs_inode
WHEN NEW.mode = 0
BEGIN
  DELETE FROM fs_file_meta WHERE session_id = NEW.session_id AND ino = NEW.ino;
END;
