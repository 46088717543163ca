-- 0011_session_secrets: the vendor keys of agents that do not go through the
-- gateway (Amp's AMP_API_KEY, Cursor's CURSOR_API_KEY), one set per session.
-- value is sealed with the server's secrets key (AES-256-GCM: nonce, then
-- ciphertext and tag; the additional data binds it to session_id and name):
-- the database never holds a key in plain text. The API lists the names,
-- never a value; the runner opens a value for the container's environment.
CREATE TABLE session_secrets (
    session_id TEXT NOT NULL REFERENCES agent_session(id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (session_id, name)
);
