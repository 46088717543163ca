-- 0002_vfs: the session VFS (agentfs-spec.md inode design), scoped per session.
--
-- Every table carries session_id REFERENCES agent_session(id) ON DELETE CASCADE, so
-- deleting a session deletes its files. Inode numbers are per session:
-- PRIMARY KEY(session_id, ino); ino 1 is the root directory of every session
-- (created lazily on first use). Numbers come from fs_meta.next_ino and are
-- never reused within a session (the FUSE mount may still hold old numbers).
--
-- Extensions to agentfs (documented in orchestrator/vfs/doc.go):
--   fs_inode.atime_ns/mtime_ns/ctime_ns  nanosecond part of each time (git, make)
--   fs_inode.created_ns                  creation time, unix nanoseconds
--   fs_inode.is_readonly                 session-vfs.md readonly flag
--   fs_inode.sha256, data_gen            cached content hash, bumped on every data change
--   fs_meta                              per-session counters: next ino, bytes used, chunk size
--   fs_orphan                            inodes kept without a dentry while open (FUSE)
--   fs_audit                             insert-only security audit (tool_calls-style)

CREATE TABLE fs_meta (
  session_id TEXT PRIMARY KEY REFERENCES agent_session(id) ON DELETE CASCADE,
  next_ino INTEGER NOT NULL DEFAULT 2,
  used_bytes INTEGER NOT NULL DEFAULT 0,
  chunk_size INTEGER NOT NULL
);

CREATE TABLE fs_inode (
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino INTEGER NOT NULL,
  mode INTEGER NOT NULL,
  uid INTEGER NOT NULL DEFAULT 0,
  gid INTEGER NOT NULL DEFAULT 0,
  size INTEGER NOT NULL DEFAULT 0,
  atime INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  ctime INTEGER NOT NULL,
  atime_ns INTEGER NOT NULL DEFAULT 0,
  mtime_ns INTEGER NOT NULL DEFAULT 0,
  ctime_ns INTEGER NOT NULL DEFAULT 0,
  created_ns INTEGER NOT NULL DEFAULT 0,
  is_readonly INTEGER NOT NULL DEFAULT 0,
  sha256 TEXT,
  data_gen INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (session_id, ino)
);

CREATE TABLE fs_dentry (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  parent_ino INTEGER NOT NULL,
  ino INTEGER NOT NULL,
  UNIQUE (session_id, parent_ino, name)
);
CREATE INDEX idx_fs_dentry_ino ON fs_dentry(session_id, ino);

CREATE TABLE fs_data (
  id INTEGER PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino INTEGER NOT NULL,
  offset INTEGER NOT NULL,
  size INTEGER NOT NULL,
  data BLOB NOT NULL,
  UNIQUE (session_id, ino, offset)
);

CREATE TABLE fs_symlink (
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino INTEGER NOT NULL,
  target TEXT NOT NULL,
  PRIMARY KEY (session_id, ino)
);

CREATE TABLE fs_orphan (
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  ino INTEGER NOT NULL,
  PRIMARY KEY (session_id, ino)
);

CREATE TABLE kv_store (
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  created_at INTEGER NOT NULL DEFAULT (unixepoch()),
  updated_at INTEGER NOT NULL DEFAULT (unixepoch()),
  PRIMARY KEY (session_id, key)
);
CREATE INDEX idx_kv_store_created_at ON kv_store(session_id, created_at);

CREATE TABLE tool_calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  parameters TEXT,
  result TEXT,
  error TEXT,
  started_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL
);
CREATE INDEX idx_tool_calls_name ON tool_calls(session_id, name);
CREATE INDEX idx_tool_calls_started_at ON tool_calls(session_id, started_at);

CREATE TABLE fs_audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  parameters TEXT,
  result TEXT,
  error TEXT,
  started_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL
);
CREATE INDEX idx_fs_audit_session ON fs_audit(session_id, id);

-- Insert-only: the audit trails refuse updates and deletes (a session's cascade
-- delete is the one way they go away).
CREATE TRIGGER tool_calls_no_update BEFORE UPDATE ON tool_calls
BEGIN SELECT RAISE(ABORT, 'tool_calls is insert-only'); END;
CREATE TRIGGER fs_audit_no_update BEFORE UPDATE ON fs_audit
BEGIN SELECT RAISE(ABORT, 'fs_audit is insert-only'); END;
