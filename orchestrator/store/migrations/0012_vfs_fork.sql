-- 0012_vfs_fork: copy-on-write forks of a session workspace (orchestrator/vfs/doc.go, "Forks").
--
-- A fork's workspace is keyed like any other by an agent_session id: a hidden
-- row (status 'draft') listed here as ws. Forking workspace P makes two: the
-- frozen fork point (kind 'base', parent_ws P) and the fork (kind 'fork',
-- parent_ws its base, origin_ws P: where a merge goes). Both get a copy of
-- P's metadata; file data is read through parent_ws for inodes below
-- base_next_ino until the triggers below copy a chunk up.

CREATE TABLE fs_fork (
  ws TEXT PRIMARY KEY REFERENCES agent_session(id) ON DELETE CASCADE,
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE, -- the visible session it belongs to
  kind TEXT NOT NULL CHECK (kind IN ('base', 'fork')),
  parent_ws TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,  -- chunks not stored here are read there
  base_next_ino INTEGER NOT NULL,                                           -- inodes below this came from parent_ws
  origin_ws TEXT REFERENCES agent_session(id) ON DELETE CASCADE,            -- fork: the workspace it was forked from
  base_ws TEXT REFERENCES agent_session(id) ON DELETE CASCADE,              -- fork: its frozen fork point
  node_id TEXT,                                                             -- fork: the node working on it (trigger below)
  created_at INTEGER NOT NULL
);
CREATE INDEX fs_fork_parent_idx ON fs_fork(parent_ws);
CREATE INDEX fs_fork_session_idx ON fs_fork(session_id);
CREATE INDEX fs_fork_node_idx ON fs_fork(node_id);
CREATE INDEX fs_fork_origin_idx ON fs_fork(origin_ws);

-- Copy-up: before a chunk changes or goes, every direct fork that still reads
-- it through this workspace gets the old row (a fork that has deleted the
-- inode needs it only if forks of its own may read through it). NOT EXISTS,
-- not INSERT OR IGNORE: the conflict policy of the statement that fires a
-- trigger (an upsert's) overrides the trigger's own.
CREATE TRIGGER fs_data_cow_update BEFORE UPDATE ON fs_data
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id)
BEGIN
  INSERT INTO fs_data(session_id, ino, offset, size, data)
  SELECT f.ws, OLD.ino, OLD.offset, OLD.size, OLD.data FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_data d WHERE d.session_id = f.ws AND d.ino = OLD.ino AND d.offset = OLD.offset)
    AND (EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino)
         OR EXISTS (SELECT 1 FROM fs_fork g WHERE g.parent_ws = f.ws));
END;

CREATE TRIGGER fs_data_cow_delete BEFORE DELETE ON fs_data
WHEN EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id)
BEGIN
  INSERT INTO fs_data(session_id, ino, offset, size, data)
  SELECT f.ws, OLD.ino, OLD.offset, OLD.size, OLD.data FROM fs_fork f
  WHERE f.parent_ws = OLD.session_id AND OLD.ino < f.base_next_ino
    AND NOT EXISTS (SELECT 1 FROM fs_data d WHERE d.session_id = f.ws AND d.ino = OLD.ino AND d.offset = OLD.offset)
    AND (EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino)
         OR EXISTS (SELECT 1 FROM fs_fork g WHERE g.parent_ws = f.ws));
END;

-- A session's forks, and a node's fork with its frozen base, go with it.
CREATE TRIGGER agent_session_delete_forks BEFORE DELETE ON agent_session
BEGIN
  DELETE FROM agent_session WHERE id IN (SELECT ws FROM fs_fork WHERE session_id = OLD.id);
END;

CREATE TRIGGER agent_node_delete_fork BEFORE DELETE ON agent_node
BEGIN
  DELETE FROM agent_session WHERE id IN (SELECT ws FROM fs_fork WHERE node_id = OLD.id
                                         UNION SELECT base_ws FROM fs_fork WHERE node_id = OLD.id);
END;
