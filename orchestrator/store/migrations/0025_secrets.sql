-- 0025_secrets: secrets per user, and per session overriding them (issue
-- 21): vendor keys (AMP_API_KEY, CURSOR_API_KEY), git credentials over
-- HTTPS, SSH private keys, GitHub and GitLab tokens. session_secrets (0011)
-- moves here: its rows become session secrets of kind vendor, still sealed
-- as they were (sealed_with 0: the additional data is session_id, NUL,
-- name); a secret set from now on is sealed with sealed_with 1 (the
-- additional data is user_id, NUL, session_id or '', NUL, name), so a value
-- copied to another row, user or session does not open.
--
-- value is sealed with the server's secrets key (AES-256-GCM: nonce, then
-- ciphertext and tag): the database never holds a secret in plain text. host
-- (the host a credential is for, e.g. github.com), username (of an HTTPS
-- credential) and public_key (of an SSH key, authorized_keys form) are not
-- secret: the API shows them, never the value.
CREATE TABLE secrets (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    session_id  TEXT REFERENCES agent_session(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (kind IN ('vendor', 'git_https', 'git_ssh', 'github_token', 'gitlab_token')),
    host        TEXT NOT NULL DEFAULT '',
    username    TEXT NOT NULL DEFAULT '',
    public_key  TEXT NOT NULL DEFAULT '',
    value       BLOB NOT NULL,
    sealed_with INTEGER NOT NULL DEFAULT 1 CHECK (sealed_with IN (0, 1)),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    used_at     INTEGER
);
CREATE UNIQUE INDEX secrets_name_idx ON secrets(user_id, COALESCE(session_id, ''), name);
CREATE INDEX secrets_session_idx ON secrets(session_id);

INSERT INTO secrets (id, user_id, session_id, name, kind, value, sealed_with, created_at, updated_at)
SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-' ||
             substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
       s.user_id, ss.session_id, ss.name, 'vendor', ss.value, 0, ss.created_at, ss.updated_at
FROM session_secrets ss JOIN agent_session s ON s.id = ss.session_id;

DROP TABLE session_secrets;

-- known_hosts pins the SSH host key of each remote a user pushed to
-- (host:port as the remote's URL names it): the first push shows the key's
-- fingerprint and the user confirms it; later pushes refuse any other key.
CREATE TABLE known_hosts (
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    host        TEXT NOT NULL,
    key_type    TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (user_id, host)
);
