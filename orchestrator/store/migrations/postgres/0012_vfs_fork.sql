-- 0012_vfs_fork (PostgreSQL): ../0012_vfs_fork.sql. A trigger's WHEN may
-- not hold a subquery here, so each function tests its condition first.
-- A BEFORE trigger returns the row (OLD for a delete, NEW for an update) so
-- that the change goes on.

CREATE TABLE fs_fork (
  ws TEXT PRIMARY KEY REFERENCES agent_session(id) ON DELETE CASCADE,
  session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('base', 'fork')),
  parent_ws TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
  base_next_ino BIGINT NOT NULL,
  origin_ws TEXT REFERENCES agent_session(id) ON DELETE CASCADE,
  base_ws TEXT REFERENCES agent_session(id) ON DELETE CASCADE,
  node_id TEXT,
  created_at BIGINT NOT NULL
);
CREATE INDEX fs_fork_parent_idx ON fs_fork(parent_ws);
CREATE INDEX fs_fork_session_idx ON fs_fork(session_id);
CREATE INDEX fs_fork_node_idx ON fs_fork(node_id);
CREATE INDEX fs_fork_origin_idx ON fs_fork(origin_ws);

CREATE FUNCTION fs_data_cow() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM fs_fork WHERE parent_ws = OLD.session_id) THEN
    INSERT INTO fs_data(session_id, ino, "offset", size, data)
    SELECT f.ws, OLD.ino, OLD."offset", OLD.size, OLD.data FROM fs_fork f
    WHERE f.parent_ws = OLD.session_id AND OLD.ino < f.base_next_ino
      AND NOT EXISTS (SELECT 1 FROM fs_data d WHERE d.session_id = f.ws AND d.ino = OLD.ino AND d."offset" = OLD."offset")
      AND (EXISTS (SELECT 1 FROM fs_inode i WHERE i.session_id = f.ws AND i.ino = OLD.ino)
           OR EXISTS (SELECT 1 FROM fs_fork g WHERE g.parent_ws = f.ws));
  END IF;
  IF TG_OP = 'DELETE' THEN
    RETURN OLD;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fs_data_cow_update BEFORE UPDATE ON fs_data
  FOR EACH ROW EXECUTE FUNCTION fs_data_cow();
CREATE TRIGGER fs_data_cow_delete BEFORE DELETE ON fs_data
  FOR EACH ROW EXECUTE FUNCTION fs_data_cow();

CREATE FUNCTION agent_session_delete_forks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM agent_session WHERE id IN (SELECT ws FROM fs_fork WHERE session_id = OLD.id);
  RETURN OLD;
END $$;
CREATE TRIGGER agent_session_delete_forks BEFORE DELETE ON agent_session
  FOR EACH ROW EXECUTE FUNCTION agent_session_delete_forks();

CREATE FUNCTION agent_node_delete_fork() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM agent_session WHERE id IN (SELECT ws FROM fs_fork WHERE node_id = OLD.id
                                         UNION SELECT base_ws FROM fs_fork WHERE node_id = OLD.id);
  RETURN OLD;
END $$;
CREATE TRIGGER agent_node_delete_fork BEFORE DELETE ON agent_node
  FOR EACH ROW EXECUTE FUNCTION agent_node_delete_fork();
